package caddymodule

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The page addresses a dead letter as encodeURIComponent does, so an ID with "//" in it (a URL,
// as some senders use) arrives as %2F%2F: the proxy passes it on as the admin API reads it (by
// its escaped path), and still refuses every way out of /hookgate/.
func TestUIProxyPassesIDsWithSlashes(t *testing.T) {
	backend, proxy, p := uiProxyUnderTest(t)
	cookie := p.cookie + "=" + p.session
	own := proxy.URL
	for _, id := range []string{"https://sender.example/events/1", "a//b", "a/./b", "a/../b", "trailing/"} {
		escaped := "/hookgate/replay/r/" + strings.ReplaceAll(url.PathEscape(id), "/", "%2F")
		resp, body := do(t, "POST", proxy.URL+escaped, "Cookie", cookie, "Sec-Fetch-Site", "same-origin", "Origin", own)
		if resp.StatusCode != http.StatusOK || body != "admin answered POST "+escaped {
			t.Errorf("the ID %q (POST %s): %d %s, want the admin API's answer", id, escaped, resp.StatusCode, body)
		}
	}
	if n := len(backend.requests()); n != 5 {
		t.Errorf("the admin API was asked %d times, want 5", n)
	}
	for _, way := range []string{"/hookgate//config/", "/hookgate/./../config/", "/hookgate/%2e%2e/config/", "/hookgate/%2E%2e%2Fconfig/",
		"/hookgateX/", "/hookgate", "/hookgate/%2e/routes", "/hookgate/routes/%2e%2e/%2e%2e/config/"} {
		if resp, body := do(t, "GET", proxy.URL+way, "Cookie", cookie); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", way, resp.StatusCode, body)
		}
	}
}
