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

// A local client with the cookie cannot strip the admin API's view of the request: headers named
// in Connection are dropped before the proxy sets Origin, X-Forwarded-* never pass, and a
// websocket upgrade from another site's page is refused like any of its requests.
func TestUIProxyHeadersTheAdminAPISees(t *testing.T) {
	backend, proxy, p := uiProxyUnderTest(t)
	cookie := p.cookie + "=" + p.session
	resp, body := do(t, "POST", proxy.URL+"/hookgate/replay/r", "Cookie", cookie, "Origin", proxy.URL,
		"Connection", "Origin, Cookie", "X-Forwarded-For", "203.0.113.9", "X-Forwarded-Host", "attacker.example", "Forwarded", "for=203.0.113.9")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: %d %s", resp.StatusCode, body)
	}
	seen := backend.requests()
	if len(seen) != 1 {
		t.Fatalf("the admin API was asked %d times, want 1", len(seen))
	}
	h := seen[0].Header
	if h.Get("Origin") != "http://"+backend.addr || h.Get("X-Forwarded-Host") != "" || h.Get("Forwarded") != "" || h.Get("Cookie") != "" ||
		strings.Contains(h.Get("X-Forwarded-For"), "203.0.113.9") {
		t.Errorf("the admin API saw %v, want only the proxy's Origin and nothing forwarded", h)
	}
	if resp, body := do(t, "GET", proxy.URL+"/hookgate/routes", "Cookie", cookie, "Sec-Fetch-Site", "cross-site", "Origin", "http://attacker.example",
		"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another site's websocket: %d %s, want 403", resp.StatusCode, body)
	}
	for _, method := range []string{"OPTIONS", "PUT", "DELETE", "PATCH"} {
		if resp, body := do(t, method, proxy.URL+"/hookgate/replay/r", "Cookie", cookie, "Origin", "null"); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s from origin null: %d %s, want 403", method, resp.StatusCode, body)
		}
	}
}
