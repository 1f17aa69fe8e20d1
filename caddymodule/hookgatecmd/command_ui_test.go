package hookgatecmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAdmin records the requests the proxy passes on.
type fakeAdmin struct {
	addr string
	mu   sync.Mutex
	seen []*http.Request
}

func (f *fakeAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, r.Clone(r.Context()))
	f.mu.Unlock()
	io.WriteString(w, "admin answered "+r.Method+" "+r.URL.RequestURI())
}

func (f *fakeAdmin) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.seen...)
}

// uiProxyUnderTest is a proxy in front of a fake admin API, and its one-time link's token.
func uiProxyUnderTest(t *testing.T) (*fakeAdmin, *httptest.Server, *uiProxy) {
	t.Helper()
	backend := &fakeAdmin{}
	adminSrv := httptest.NewServer(backend)
	t.Cleanup(adminSrv.Close)
	backend.addr = adminSrv.Listener.Addr().String()
	p, err := newUIProxy(adminSrv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(p)
	t.Cleanup(proxy.Close)
	return backend, proxy, p
}

// do sends one request to the proxy, following no redirect, with the headers given as
// name, value pairs.
func do(t *testing.T, method, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// The one-time link sets an HttpOnly, SameSite=Strict cookie and sends the browser on to a URL
// without the token; the link does not work twice, nor does a wrong token.
func TestUIProxyLoginIsOneTime(t *testing.T) {
	_, proxy, p := uiProxyUnderTest(t)
	if resp, body := do(t, "GET", proxy.URL+uiLoginPath+"?token=0123"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d %s, want 401", resp.StatusCode, body)
	}
	link := proxy.URL + uiLoginPath + "?token=" + p.token
	resp, body := do(t, "GET", link, "Sec-Fetch-Site", "none")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/hookgate/ui" {
		t.Fatalf("the link: %d %s (Location %q), want 303 to /hookgate/ui", resp.StatusCode, body, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Value != p.session {
		t.Fatalf("the link set %v, want one HttpOnly SameSite=Strict session cookie", resp.Header.Values("Set-Cookie"))
	}
	if strings.Contains(cookies[0].Value, strings.TrimPrefix(link, proxy.URL+uiLoginPath+"?token=")) {
		t.Fatal("the cookie carries the link's token, which the browser's history keeps")
	}
	if resp, body := do(t, "GET", link, "Sec-Fetch-Site", "none"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the link used again: %d %s, want 401", resp.StatusCode, body)
	}
}

// Only the logged-in browser's own requests for hookgate's endpoints reach the admin API, which
// sees them as the CLI's: from its own address as Origin, without the browser's cookie.
func TestUIProxyRefusals(t *testing.T) {
	backend, proxy, p := uiProxyUnderTest(t)
	cookie := p.cookie + "=" + p.session
	own := proxy.URL // http://127.0.0.1:port, the page's origin
	for _, tc := range []struct {
		name, method, path string
		header             []string
		status             int
	}{
		{"no cookie", "GET", "/hookgate/ui", nil, http.StatusUnauthorized},
		{"a wrong cookie", "GET", "/hookgate/routes", []string{"Cookie", p.cookie + "=" + strings.Repeat("0", 64)}, http.StatusUnauthorized},
		{"another site's page", "GET", "/hookgate/routes", []string{"Cookie", cookie, "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"another port of 127.0.0.1", "POST", "/hookgate/replay/r", []string{"Cookie", cookie, "Sec-Fetch-Site", "same-site", "Origin", own}, http.StatusForbidden},
		{"a foreign Origin's POST", "POST", "/hookgate/replay/r", []string{"Cookie", cookie, "Origin", "http://attacker.example"}, http.StatusForbidden},
		{"a POST without Origin", "POST", "/hookgate/replay/r", []string{"Cookie", cookie}, http.StatusForbidden},
		{"a rebound host name", "GET", "/hookgate/routes", []string{"Cookie", cookie, "Host", "attacker.example:80"}, http.StatusForbidden},
		{"Caddy's config", "GET", "/config/", []string{"Cookie", cookie}, http.StatusNotFound},
		{"Caddy's load", "POST", "/load", []string{"Cookie", cookie, "Origin", own}, http.StatusNotFound},
		{"Caddy's stop", "POST", "/stop", []string{"Cookie", cookie, "Origin", own}, http.StatusNotFound},
		{"Caddy's profiler", "GET", "/debug/pprof/", []string{"Cookie", cookie}, http.StatusNotFound},
		{"Caddy's metrics", "GET", "/metrics", []string{"Cookie", cookie}, http.StatusNotFound},
		{"a dot-dot way out", "GET", "/hookgate/../config/", []string{"Cookie", cookie}, http.StatusNotFound},
		{"an escaped dot-dot", "GET", "/hookgate/%2e%2e/config/", []string{"Cookie", cookie}, http.StatusNotFound},
	} {
		if resp, body := do(t, tc.method, proxy.URL+tc.path, tc.header...); resp.StatusCode != tc.status {
			t.Errorf("%s (%s %s): %d %s, want %d", tc.name, tc.method, tc.path, resp.StatusCode, body, tc.status)
		}
	}
	if seen := backend.requests(); len(seen) != 0 {
		t.Fatalf("the admin API was asked %s %s, want nothing refused passed on", seen[0].Method, seen[0].URL)
	}

	for _, tc := range []struct {
		method, path string
		header       []string
	}{
		{"GET", "/hookgate/ui", []string{"Cookie", cookie, "Sec-Fetch-Site", "none", "Referer", "http://elsewhere.example/"}},
		{"POST", "/hookgate/replay/r%2Fx/evt_1", []string{"Cookie", cookie, "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors", "Origin", own}},
	} {
		resp, body := do(t, tc.method, proxy.URL+tc.path, tc.header...)
		if resp.StatusCode != http.StatusOK || body != "admin answered "+tc.method+" "+tc.path {
			t.Errorf("%s %s: %d %s, want the admin API's answer", tc.method, tc.path, resp.StatusCode, body)
		}
	}
	seen := backend.requests()
	if len(seen) != 2 {
		t.Fatalf("the admin API was asked %d times, want 2", len(seen))
	}
	for _, r := range seen {
		adminOrigin := "http://" + backend.addr
		if r.Host != backend.addr || r.Header.Get("Origin") != adminOrigin || r.Header.Get("Cookie") != "" || r.Header.Get("Referer") != "" ||
			r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Sec-Fetch-Mode") != "" {
			t.Errorf("the admin API got %s %s with %v, want Origin %s and neither cookie, Referer nor Sec-Fetch-*", r.Method, r.URL, r.Header, adminOrigin)
		}
	}
}

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

// `caddy hookgate ui --address ADMIN` prints a link that opens the page in a browser that keeps
// cookies, and stops when interrupted.
func TestUICommandPrintsALinkThatOpensThePage(t *testing.T) {
	backend := &fakeAdmin{}
	adminSrv := httptest.NewServer(backend)
	t.Cleanup(adminSrv.Close)
	// The link is the first line printed; the pipe ends with an error if the command ends first,
	// or prints nothing for too long.
	printed, w := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		err := Run(ctx, w, "ui", "--address", adminSrv.Listener.Addr().String())
		w.CloseWithError(fmt.Errorf("the command ended: %v", err))
		done <- err
	}()
	late := time.AfterFunc(10*time.Second, func() { w.CloseWithError(errors.New("the command printed no link")) })
	line, err := bufio.NewReader(printed).ReadString('\n')
	late.Stop()
	if err != nil {
		t.Fatal(err)
	}
	link := strings.TrimSpace(line[strings.Index(line, "http://127.0.0.1:"):])
	jar, _ := cookiejar.New(nil)
	resp, err := (&http.Client{Jar: jar}).Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "admin answered GET /hookgate/ui" || resp.Request.URL.RawQuery != "" {
		t.Fatalf("the link %s led to %s: %d %s, want the admin API's /hookgate/ui", link, resp.Request.URL, resp.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the command, interrupted: %v", err)
	}
}
