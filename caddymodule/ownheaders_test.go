package caddymodule

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// forgedHeadersSeen lists the app's received Hookgate-* headers (in any spelling) whose value is
// forged.
func forgedHeadersSeen(app *hooktest.Upstream) []string {
	app.Mu.Lock()
	defer app.Mu.Unlock()
	var forged []string
	for _, header := range app.Headers {
		for name, values := range header {
			folded := strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(name))
			for _, v := range values {
				if strings.HasPrefix(folded, "hookgate-") && strings.Contains(v, "forged") {
					forged = append(forged, name+": "+v)
				}
			}
		}
	}
	slices.Sort(forged)
	return forged
}

// sendForged sends a signed standard event to path with forged Hookgate-* headers beside its own.
func sendForged(t *testing.T, client *http.Client, path, id, secret string) hooktest.Reply {
	t.Helper()
	ev := hooktest.SignedEvent(t, id, `{"type":"test"}`, time.Now(), secret)
	forgeHookgateHeaders(ev.Headers, "on "+path)
	awaitLoadSettled(t, client)
	got, err := hooktest.TrySendTo(client, "http://localhost:9080"+path, ev)
	if err != nil {
		t.Fatalf("sending to %s: %v", path, err)
	}
	return got
}

// startSite starts the gateway with testSite's global options (and globals after them) and a
// site whose body is site, in which %[1]s is the app's address and %[2]s the ledger's directory.
func startSite(t *testing.T, app net.Addr, site string, globals ...string) *caddytest.Tester {
	t.Helper()
	cfg := testSite + fmt.Sprintf(site, app, storageDir) + "}\n"
	cfg = strings.Replace(cfg, "grace_period 5s\n", "grace_period 5s\n"+strings.Join(globals, ""), 1)
	tester := caddytest.NewTester(t)
	tester.InitServer(cfg, "caddyfile")
	return tester
}

// expectNothingForged fails the test if the app received a forged Hookgate-* header.
func expectNothingForged(t *testing.T, app *hooktest.Upstream) {
	t.Helper()
	if forged := forgedHeadersSeen(app); len(forged) > 0 {
		t.Errorf("the app got %s", strings.Join(forged, ", "))
	}
}

// With hookgate inside handle blocks, docs/security.md's site-level `request_header -Hookgate-*` runs
// before every block: the app reached from another block gets nothing forged, the genuine event
// keeps hookgate's headers, and of two routes whose prefixes extend one another
// (/hooks/line*, /hooks/linear*) only the longer one checks /hooks/linear.
func TestSiteRequestHeaderKeepsForgedHeadersFromHandleBlocks(t *testing.T) {
	app := hooktest.NewUpstream(t)
	tester := startSite(t, app.Listener.Addr(), `
	request_header -Hookgate-*
	handle /hooks/line* {
		hookgate {
			preset  standard
			secret  whsec_bGluZS1vbmx5LXNlY3JldC1ub3QtbGluZWFycyEhISE=
			name    strip_line
			storage badger %[2]s
		}
		reverse_proxy %[1]s
	}
	handle /hooks/linear* {
		hookgate {
			preset  standard
			secret  {env.HOOKGATE_TEST_SECRET}
			name    strip_linear
			storage badger %[2]s
		}
		reverse_proxy %[1]s
	}
	handle {
		reverse_proxy %[1]s
	}
`)

	if got := sendForged(t, tester.Client, "/hooks/linear", "evt_strip_handle", hooktest.Secret); got.Status != http.StatusOK {
		t.Fatalf("the genuine linear event: got %d %q", got.Status, got.Body)
	}
	if got := app.Count("evt_strip_handle"); got != 1 {
		t.Fatalf("the app got the genuine event %d times, want once with hookgate's Hookgate-Event-Id", got)
	}
	for _, path := range []string{"/other", "/hooks", "/hooks/lin"} {
		sendForged(t, tester.Client, path, "evt_strip_other", hooktest.Secret)
	}
	if got := sendForged(t, tester.Client, "/hooks/line/x", "evt_strip_line", hooktest.Secret); got.Status != http.StatusUnauthorized {
		t.Errorf("a linear-signed event on /hooks/line/x: got %d %q, want line's 401", got.Status, got.Body)
	}
	expectNothingForged(t, app)
}

// A server that lets `_` and `.` header names in (Caddy drops them by default) still hands the app
// no forged Hookgate_Verified or Hookgate.Verified, which CGI, PHP, Rack and Django read as
// Hookgate-Verified: not with a genuine event, nor on a path hookgate does not take.
func TestUnderscoreAndDotSpellingsOfHookgateHeadersAreStripped(t *testing.T) {
	app := hooktest.NewUpstream(t)
	tester := startSite(t, app.Listener.Addr(), `
	hookgate /hooks/* {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    strip_spellings
		storage badger %[2]s
	}
	reverse_proxy %[1]s
`, `	servers {
		expected_underscore_headers Hookgate_*
		expected_dot_headers Hookgate.*
	}
`)

	if got := sendForged(t, tester.Client, "/hooks/x", "evt_strip_spellings", hooktest.Secret); got.Status != http.StatusOK {
		t.Fatalf("the genuine event: got %d %q", got.Status, got.Body)
	}
	sendForged(t, tester.Client, "/other", "evt_strip_spellings_other", hooktest.Secret)
	if app.Total() != 2 {
		t.Fatalf("the app got %d requests, want the genuine event and /other", app.Total())
	}
	expectNothingForged(t, app)
}

// Trailer fields come after the body, once every handler has looked at the headers; reverse_proxy
// hands them on. A forged Hookgate-Verified sent as a trailer (RFC 9110 forbids merging trailers
// into headers, but Tomcat's allowedTrailerHeaders and Apache's MergeTrailers do) reaches the app
// neither beside a genuine event nor on a path hookgate does not take.
func TestForgedHookgateTrailersNeverReachTheApp(t *testing.T) {
	var mu sync.Mutex
	var trailers []string
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the trailers are there once the body is read
		mu.Lock()
		defer mu.Unlock()
		for name, values := range r.Trailer {
			trailers = append(trailers, fmt.Sprintf("%s %s: %q", r.URL.Path, name, values))
		}
	}))
	t.Cleanup(app.Close)
	tester := startSite(t, app.Listener.Addr(), `
	hookgate /hooks/* {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    strip_trailers
		storage badger %[2]s
	}
	reverse_proxy %[1]s
`)

	send := func(path string, ev *hooktest.Event) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://localhost:9080"+path, io.NopCloser(strings.NewReader(ev.Body)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = ev.Headers.Clone()
		req.ContentLength = -1 // chunked, which is what carries trailers
		req.Trailer = http.Header{"Hookgate-Verified": {"forged"}, "Hookgate-Event-Id": {"forged"}}
		awaitLoadSettled(t, tester.Client)
		resp, err := tester.Client.Do(req)
		if err != nil {
			t.Fatalf("sending to %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send("/hooks/x", hooktest.SignedEvent(t, "evt_strip_trailers", `{"type":"test"}`, time.Now(), hooktest.Secret)); got != http.StatusOK {
		t.Fatalf("the genuine event: got %d", got)
	}
	if got := send("/other", hooktest.SignedEvent(t, "evt_strip_trailers_other", `{"type":"test"}`, time.Now(), hooktest.Secret)); got != http.StatusOK {
		t.Fatalf("/other: got %d", got)
	}
	mu.Lock()
	defer mu.Unlock()
	var forged []string
	for _, tr := range trailers {
		if strings.Contains(tr, "forged") {
			forged = append(forged, tr)
		}
	}
	if len(forged) > 0 {
		t.Errorf("the app got the trailers %s", strings.Join(forged, ", "))
	}
}

// handle_errors is a route list of its own, and some requests reach it before the site's routes
// (and so the strip route) ran: one basic_auth refused (ordered before hookgate), one Caddy refused
// itself (a method over 32 bytes, refused even before Caddy drops `_` and `.` header names). An
// error route that proxies to the app, with docs/security.md's request_header lines, hands it nothing
// forged.
func TestErrorRoutesThatProxyToTheAppGetNothingForged(t *testing.T) {
	app := hooktest.NewUpstream(t)
	tester := startSite(t, app.Listener.Addr(), `
	basic_auth /admin* {
		bob $2a$14$Zkx19XLiW6VYouLHR5NmfOFU0z2GTNmpkT/5qqR7hx4IjWJPDhjvG
	}
	hookgate /hooks/* {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    strip_errors
		storage badger %[2]s
	}
	reverse_proxy %[1]s
	handle_errors {
		request_header -Hookgate-*
		request_header -Hookgate_*
		request_header -Hookgate.*
		reverse_proxy %[1]s
	}
`)

	for _, method := range []string{http.MethodPost, strings.Repeat("LONGMETHOD", 4)} {
		for _, path := range []string{"/admin", "/hooks/x"} {
			req, err := http.NewRequest(method, "http://localhost:9080"+path, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			forgeHookgateHeaders(req.Header, method[:4]+" "+path)
			awaitLoadSettled(t, tester.Client)
			resp, err := tester.Client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			resp.Body.Close()
		}
	}
	if app.Total() != 3 { // /admin twice, and /hooks/x with the long method: all by handle_errors
		t.Fatalf("the app got %d requests, want the 3 error routes", app.Total())
	}
	expectNothingForged(t, app)
}
