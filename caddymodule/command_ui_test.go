package caddymodule

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
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

// `caddy hookgate ui --address ADMIN` prints a link that opens the page in a browser that keeps
// cookies, and stops when interrupted.
func TestUICommandPrintsALinkThatOpensThePage(t *testing.T) {
	backend := &fakeAdmin{}
	adminSrv := httptest.NewServer(backend)
	t.Cleanup(adminSrv.Close)
	cmd := uiCommand()
	printed := make(lineOf, 1)
	cmd.SetOut(printed)
	cmd.SetArgs([]string{"--address", adminSrv.Listener.Addr().String()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var line string
	select {
	case line = <-printed:
	case err := <-done:
		t.Fatalf("the command ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the command printed no link")
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
