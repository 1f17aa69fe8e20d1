package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
)

// A sync route in monitor mode in front of a live app: every request reaches the app as it came
// and gets the app's answer, whatever hookgate would have said, and is classified as it would
// have been: an INFO log line for each that would not have been accepted, hookgate_requests_total
// with mode="monitor", and `caddy hookgate status`. Only the one that would be accepted carries
// Hookgate-Verified. Its ledger keeps the event, so once monitor is off the same event is a
// duplicate.
func TestMonitorHandsEveryRequestOnAndClassifiesIt(t *testing.T) {
	const route = "monitored"
	up := hooktest.NewUpstream(t)
	up.Status.Store(http.StatusAccepted) // not an answer hookgate ever gives a sync request
	logFile := filepath.Join(t.TempDir(), "hookgate.log")
	tester := caddytest.NewTester(t)
	tester.InitServer(withLogFile(gatewayConfig(route, up.Listener.Addr().String(), "monitor"), logFile, "INFO"), "caddyfile")
	before := scrape(t)

	// Each request, and what the app must get of it.
	forged := hooktest.SignedEvent(t, "evt_mon_forged", `{"data":{"object":{"id":"obj_mon_f","updated":1}}}`, time.Now(), "whsec_bm90IHRoZSBzZWNyZXQgYXQgYWxsISEh")
	forged.Headers.Set("Hookgate-Verified", "standard") // a client's own is stripped, as ever
	late := hooktest.SignedEvent(t, "evt_mon_late", `{"data":{"object":{"id":"obj_mon_l","updated":1}}}`, time.Now().Add(-time.Hour), hooktest.Secret)
	valid := hooktest.NewEvent(t, "evt_mon_1", "obj_mon_1", 2)
	older := hooktest.NewEvent(t, "evt_mon_older", "obj_mon_1", 1)
	huge := hooktest.NewEvent(t, "evt_mon_huge", strings.Repeat("x", 5000), 1) // over max_body 4KiB
	steps := []struct {
		name     string
		ev       *hooktest.Event
		verified bool
	}{
		{"forged signature", forged, false},
		{"timestamp an hour old", late, false},
		{"valid event", valid, true},
		{"the same event again", valid, false},
		{"an older version of the entity", older, false},
		{"body over max_body", huge, false},
	}
	for i, step := range steps {
		hooktest.ExpectReply(t, step.name, send(t, tester.Client, step.ev), http.StatusAccepted, "upstream says hi")
		if n := up.Total(); n != i+1 {
			t.Fatalf("%s: the app got %d requests in all, want %d", step.name, n, i+1)
		}
		up.Mu.Lock()
		got, body := up.Headers[i], up.Bodies[i]
		up.Mu.Unlock()
		if body != step.ev.Body {
			t.Errorf("%s: the app got the body %.60q..., want it unchanged (%.60q...)", step.name, body, step.ev.Body)
		}
		if got.Get("Webhook-Signature") != step.ev.Headers.Get("Webhook-Signature") || got.Get("Webhook-Id") != step.ev.ID {
			t.Errorf("%s: the app got webhook-id %q, webhook-signature %q: want the provider's, unchanged", step.name, got.Get("Webhook-Id"), got.Get("Webhook-Signature"))
		}
		verified, id := got.Get("Hookgate-Verified"), got.Get("Hookgate-Event-Id")
		switch {
		case step.verified && (verified != "standard" || id != step.ev.ID):
			t.Errorf("%s: the app got Hookgate-Verified %q, Hookgate-Event-Id %q; want standard and %s", step.name, verified, id, step.ev.ID)
		case !step.verified && (verified != "" || id != ""):
			t.Errorf("%s: the app got Hookgate-Verified %q, Hookgate-Event-Id %q; want neither: hookgate would not have accepted it", step.name, verified, id)
		}
	}

	series := func(outcome, reason string) string {
		return fmt.Sprintf(`hookgate_requests_total{mode="monitor",outcome=%q,reason=%q,route=%q}`, outcome, reason, route)
	}
	after := scrape(t)
	for name, want := range map[string]float64{
		series("rejected", "signature"):      1,
		series("rejected", "timestamp"):      1,
		series("rejected", "body_too_large"): 1,
		series("accepted", ""):               1,
		series("duplicate", ""):              1,
		series("stale", ""):                  1,
	} {
		if d := after[name] - before[name]; d != want {
			t.Errorf("%s went up by %v, want %v", name, d, want)
		}
	}
	for name := range after {
		if strings.Contains(name, `route="`+route+`"`) && strings.Contains(name, `mode="enforce"`) {
			t.Errorf("a monitored request was counted as enforced: %s", name)
		}
	}

	type logged struct{ outcome, reason string }
	want := []logged{
		{"rejected", "signature mismatch"}, {"rejected", "timestamp"}, {"duplicate", ""}, {"stale", ""}, {"rejected", "max_body"},
	}
	var lines []logLine
	hooktest.WaitFor(t, "the INFO lines of the requests that would not have been accepted", 5*time.Second, func() bool {
		all, _ := readLogLines(t, logFile)
		lines = lines[:0]
		for _, l := range all {
			if strings.HasPrefix(l.str("msg"), "webhook ") && l.str("route") == route {
				lines = append(lines, l)
			}
		}
		return len(lines) >= len(want)
	})
	if len(lines) != len(want) {
		t.Fatalf("%d request lines at INFO, want %d (one per request that would not have been accepted): %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l.str("level") != "info" || l.str("outcome") != w.outcome || l.str("mode") != "monitor" || !strings.Contains(l.str("reason"), w.reason) {
			t.Errorf("line %d: %v; want an info line with outcome %s, mode monitor, a reason naming %q", i, l, w.outcome, w.reason)
		}
	}

	wantOutcomes := map[string]int64{"accepted": 1, "rejected": 3, "duplicate": 1, "stale": 1, "ignored": 0, "busy": 0}
	wantReasons := map[string]int64{"signature": 1, "timestamp": 1, "body_too_large": 1}
	status := func(when string) {
		t.Helper()
		out, err := runHookgateCLIAt("localhost:2999", "status", route)
		if err != nil {
			t.Fatalf("caddy hookgate status %s %s: %v", route, when, err)
		}
		var st monitorStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status %q: %v", out, err)
		}
		if st.Mode != "monitor" || fmt.Sprint(st.Outcomes) != fmt.Sprint(wantOutcomes) || fmt.Sprint(st.Reasons) != fmt.Sprint(wantReasons) {
			t.Errorf("status %s:\n%s\nwant mode monitor, outcomes %v, reasons %v", when, out, wantOutcomes, wantReasons)
		}
	}
	status("while monitored")
	tester.InitServer(gatewayConfig(route, up.Listener.Addr().String(), "monitor", "lease 2m"), "caddyfile")
	status("after a reload that keeps the route monitored")

	// Enforced from now on: the ledger already has the event the app took.
	tester.InitServer(gatewayConfig(route, up.Listener.Addr().String()), "caddyfile")
	hooktest.ExpectReply(t, "the same event once monitor is off", send(t, tester.Client, valid), http.StatusOK, `{"received":true,"duplicate":true}`)
	hooktest.ExpectReply(t, "a forgery once monitor is off", send(t, tester.Client, forged), http.StatusUnauthorized, "signature")
	if n := up.Total(); n != len(steps) {
		t.Fatalf("the app got %d requests in all, want still %d: enforced, hookgate answers these itself", n, len(steps))
	}
	if status, body := admin(t, http.MethodGet, "/hookgate/status/"+route); status != http.StatusNotFound {
		t.Errorf("status of the route once monitor is off: %d %s, want 404 (a sync route has no status)", status, body)
	}
}

// An event whose first copy the app is still processing (409 when enforced) is handed on too, in
// monitor mode, and counted busy with reason in_flight.
func TestMonitorHandsOnAnEventStillInFlight(t *testing.T) {
	const route = "monitorinflight"
	up := hooktest.NewUpstream(t)
	block := make(chan struct{})
	up.Block = block
	unblock := sync.OnceFunc(func() { close(block) })
	t.Cleanup(unblock) // before the upstream closes, which waits for the requests it holds
	tester := caddytest.NewTester(t)
	tester.InitServer(gatewayConfig(route, up.Listener.Addr().String(), "monitor"), "caddyfile")
	inFlight := fmt.Sprintf(`hookgate_requests_total{mode="monitor",outcome="busy",reason="in_flight",route=%q}`, route)
	before := scrape(t)[inFlight]

	ev := hooktest.NewEvent(t, "evt_mon_inflight", "obj_mon_inflight", 1)
	var wg sync.WaitGroup
	replies := make([]hooktest.Reply, 2)
	for i := range replies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := trySend(tester.Client, ev)
			if err != nil {
				t.Errorf("copy %d: %v", i+1, err)
			}
			replies[i] = got
		}()
		hooktest.WaitFor(t, fmt.Sprintf("copy %d at the app", i+1), 10*time.Second, func() bool { return up.Total() == i+1 })
	}
	unblock()
	wg.Wait()
	for i, got := range replies {
		hooktest.ExpectReply(t, fmt.Sprintf("copy %d", i+1), got, http.StatusOK, "upstream says hi")
	}
	if d := scrape(t)[inFlight] - before; d != 1 {
		t.Errorf("%s went up by %v, want 1", inFlight, d)
	}
}

// monitor is for sync routes: with forward it is refused when the config loads.
func TestMonitorWithForwardIsRefused(t *testing.T) {
	err := validateCaddyfile(t, gatewayConfig("monitorasync", unusedUpstream, asyncRoute(unusedUpstream), "monitor"))
	if err == nil || !strings.Contains(err.Error(), "monitor and forward cannot be used together") {
		t.Fatalf("monitor with forward: %v, want it refused", err)
	}
	if err := validateCaddyfile(t, gatewayConfig("monitorsync", unusedUpstream, "monitor")); err != nil {
		t.Fatalf("monitor on a sync route: %v", err)
	}
}

// sign_upstream has the app check the gateway's signature, which monitor adds only to the requests
// hookgate would accept: the app would refuse the rest (a provider's retry of an event it took,
// one the only lines leave out, any while the ledger is down), which monitor must never cause.
// Together they are refused when the config loads.
func TestMonitorWithSignUpstreamIsRefused(t *testing.T) {
	const gateway = "whsec_Z2F0ZXdheS1zaWduYXR1cmUtc2VjcmV0LWZvci10ZXN0cw=="
	err := validateCaddyfile(t, presetGatewayConfig("stripe", "monitorsigned", unusedUpstream, "monitor", "sign_upstream "+gateway))
	if err == nil || !strings.Contains(err.Error(), "monitor and sign_upstream cannot be used together") || strings.Contains(err.Error(), gateway) {
		t.Fatalf("monitor with sign_upstream: %v, want it refused, without the secret", err)
	}
	if err := validateCaddyfile(t, presetGatewayConfig("stripe", "signed", unusedUpstream, "sign_upstream "+gateway)); err != nil {
		t.Fatalf("sign_upstream on an enforced sync route: %v", err)
	}
}

// failingClaims is a ledger that cannot be reached.
type failingClaims struct{ instantStore }

func (*failingClaims) Claim(context.Context, dedupe.Claim) (dedupe.Outcome, error) {
	return 0, errors.New("connection refused")
}

// appEcho is an app that answers 418 with what it got.
type appEcho struct {
	header http.Header
	body   []byte
}

func (a *appEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	a.header = r.Header.Clone()
	var err error
	if a.body, err = io.ReadAll(r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusTeapot)
	return nil
}

// Whatever part of the body hookgate read before it would have refused the request, the app gets
// the body whole: a chunked body over max_body (read up to it), and a verified event the ledger
// could not record (503 when enforced).
func TestMonitorHandsOnTheWholeBodyWhereverHookgateStopped(t *testing.T) {
	app := &appEcho{}
	f := newRequestPathFixture(t, false, caddyhttp.HandlerFunc(app.ServeHTTP))
	f.h.Monitor = true
	f.h.MaxBody = 4096
	serve := func(header http.Header, body []byte, length int64) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/hooks/bench", io.NopCloser(bytes.NewReader(body)))
		r.Header, r.ContentLength = header, length
		w := httptest.NewRecorder()
		if err := f.h.ServeHTTP(w, r, caddyhttp.HandlerFunc(app.ServeHTTP)); err != nil {
			t.Fatal(err)
		}
		return w
	}

	header, body := f.signed(t, "evt_mon_chunked", 'c', 10000)
	if w := serve(header.Clone(), body, -1); w.Code != http.StatusTeapot || !bytes.Equal(app.body, body) {
		t.Errorf("chunked body over max_body: answered %d, the app got %d of %d bytes; want the app's 418 and the body whole", w.Code, len(app.body), len(body))
	}

	f.h.ledger = &failingClaims{}
	header, body = f.signed(t, "evt_mon_ledger_down", 'd', 1000)
	w := serve(header.Clone(), body, int64(len(body)))
	if w.Code != http.StatusTeapot || !bytes.Equal(app.body, body) {
		t.Errorf("ledger down: answered %d, the app got %d of %d bytes; want the app's 418 and the body whole", w.Code, len(app.body), len(body))
	}
	if app.header.Get("Hookgate-Verified") != "" || w.Header().Get("Retry-After") != "" || w.Header().Get("Content-Type") != "" {
		t.Errorf("ledger down: the app got Hookgate-Verified %q, the client Retry-After %q and Content-Type %q; want none of hookgate's",
			app.header.Get("Hookgate-Verified"), w.Header().Get("Retry-After"), w.Header().Get("Content-Type"))
	}
}

// A body hookgate read before it would have refused the request is held, under monitor, until
// the app has taken it: that copy counts in the server's body_budget like any body a route holds,
// so forged requests to a slow app cannot hold bodies past the budget. A request whose copy the
// budget cannot hold is counted busy and handed on unread.
func TestMonitorCountsTheBodyItHandsOnInTheBodyBudget(t *testing.T) {
	var reserved int64
	app := &appEcho{}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		reserved = bufferedBodies.used.Load()
		return app.ServeHTTP(w, r)
	})
	f := newRequestPathFixture(t, false, next)
	f.h.Monitor = true
	f.h.monitored = &monitorCounts{outcomes: map[string]int64{}, reasons: map[string]int64{}}
	serve := func(header http.Header, body []byte) {
		t.Helper()
		if err := f.h.ServeHTTP(&discardWriter{header: make(http.Header)}, f.signedRequest(header, body), next); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(app.body, body) {
			t.Fatalf("the app got %d of %d bytes, want the body whole", len(app.body), len(body))
		}
	}

	header, body := f.signed(t, "evt_mon_budget", 'b', 100000)
	header.Set("Webhook-Signature", "v1,"+strings.Repeat("A", 43)+"=") // read, then refused: forged
	serve(header, body)
	if reserved < int64(len(body)) {
		t.Errorf("%d bytes of the body budget reserved while the app takes a %d-byte body hookgate read and keeps", reserved, len(body))
	}
	if f.h.monitored.outcomes["rejected"] != 1 {
		t.Fatalf("outcomes %v, want the forgery rejected", f.h.monitored.outcomes)
	}

	header, body = f.signed(t, "evt_mon_budget_full", 'f', 100000)
	f.h.app.bodyBudget = pooledSize(int64(len(body))) // room for the route's read of it, not for the copy too
	serve(header, body)
	if f.h.monitored.outcomes["busy"] != 1 || f.h.monitored.reasons[reasonBodyBudget] != 1 {
		t.Errorf("outcomes %v, reasons %v: want the request the budget cannot hold twice busy, body_budget", f.h.monitored.outcomes, f.h.monitored.reasons)
	}
	if used := bufferedBodies.used.Load(); used != 0 {
		t.Errorf("%d bytes of the body budget still reserved once the requests are over", used)
	}
}

// A monitored route holds a body twice while it reads it (its own read, and the copy it hands on):
// a max_body the body budget cannot hold twice is refused when the config loads, as it would be
// busy for ever.
func TestMonitorMaxBodyTheBudgetCannotHoldTwiceIsRefused(t *testing.T) {
	err := validateCaddyfile(t, budgetConfig("8KiB", "monitorbudget", unusedUpstream, "monitor")) // max_body 4KiB
	if err == nil || !strings.Contains(err.Error(), "the copy monitor keeps") || !strings.Contains(err.Error(), "body_budget 8.0 KiB") {
		t.Fatalf("monitor with max_body 4KiB in a budget of 8KiB: %v, want it refused", err)
	}
	if err := validateCaddyfile(t, budgetConfig("8KiB", "enforcebudget", unusedUpstream)); err != nil {
		t.Fatalf("max_body 4KiB in a budget of 8KiB, enforced: %v", err)
	}
	if err := validateCaddyfile(t, budgetConfig("9KiB", "monitorbudget", unusedUpstream, "monitor")); err != nil {
		t.Fatalf("monitor with max_body 4KiB in a budget of 9KiB: %v", err)
	}
}

// trailing is a chunked body whose trailers, as net/http's, arrive in the request's map at its end.
type trailing struct {
	io.Reader
	trailer http.Header
}

func (b *trailing) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF {
		b.trailer.Set("Hookgate-Verified", "forged")
		b.trailer.Set("Hookgate-Event-Id", "forged")
	}
	return n, err
}

// A client's own Hookgate-* trailers never reach the app from a monitored route, even when the
// route hands on a body it did not read to its end (a JSON config need not have the strip route
// that the Caddyfile directive adds): refused on the headers alone, over max_body, or beyond the
// body budget.
func TestMonitorHandsOnNoForgedTrailers(t *testing.T) {
	var trailers http.Header
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return err
		}
		trailers = r.Trailer.Clone()
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
	f := newRequestPathFixture(t, false, next)
	f.h.Monitor = true
	f.h.MaxBody = 4096
	f.h.monitored = &monitorCounts{outcomes: map[string]int64{}, reasons: map[string]int64{}}
	for _, c := range []struct {
		name   string
		size   int
		header func(http.Header)
		budget int64
	}{
		{"timestamp an hour old", 100, func(h http.Header) { h.Set("Webhook-Timestamp", fmt.Sprint(time.Now().Add(-time.Hour).Unix())) }, 64 << 20},
		{"chunked body over max_body", 10000, func(http.Header) {}, 64 << 20},
		{"beyond the body budget", 100, func(http.Header) {}, 1},
	} {
		header, body := f.signed(t, "evt_mon_trailers", 't', c.size)
		c.header(header)
		f.h.app.bodyBudget = c.budget
		r := f.signedRequest(header, nil)
		r.Trailer = http.Header{"Hookgate-Verified": nil, "Hookgate-Event-Id": nil} // announced
		r.Body, r.ContentLength = io.NopCloser(&trailing{Reader: bytes.NewReader(body), trailer: r.Trailer}), -1
		trailers = nil
		if err := f.h.ServeHTTP(&discardWriter{header: make(http.Header)}, r, next); err != nil {
			t.Fatal(err)
		}
		if trailers.Get("Hookgate-Verified") != "" || trailers.Get("Hookgate-Event-Id") != "" {
			t.Errorf("%s: the app got the trailers %v", c.name, trailers)
		}
	}
}

// A monitored route strips a client's own Hookgate-* headers itself. Inside `handle`, hookgate
// without a matcher of its own has no strip route after it, and neither has a JSON config that
// does not add one: a request hookgate would refuse, handed on as it came, still reaches the app
// without them, and one it would accept carries only hookgate's own.
func TestMonitorStripsAClientsOwnHeadersItself(t *testing.T) {
	up := hooktest.NewUpstream(t)
	caddyfile := testSite + `	handle /hooks/* {
		hookgate {
			preset standard
			secret {env.HOOKGATE_TEST_SECRET}
			name monitor_strip
			storage badger ` + storageDir + `
			monitor
		}
		reverse_proxy ` + up.Listener.Addr().String() + `
	}
}
`
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(adapted), "hookgate_strip") {
		t.Fatalf("the adapted config has a strip route, so it would hide the monitor's own strip:\n%s", adapted)
	}
	jsonConfig := fmt.Sprintf(`{
	"admin": {"listen": "localhost:2999"},
	"apps": {"http": {"http_port": 9080, "servers": {"srv0": {
		"listen": ["127.0.0.1:9080"],
		"routes": [{"match": [{"path": ["/hooks/*"]}], "handle": [
			{"handler": "hookgate", "preset": "standard", "secrets": ["{env.HOOKGATE_TEST_SECRET}"], "name": "monitor_strip",
			 "storage": {"backend": "badger", "dir": %q}, "monitor": true},
			{"handler": "reverse_proxy", "upstreams": [{"dial": %q}]}
		]}],
		"automatic_https": {"disable": true}
	}}}}
}`, storageDir, up.Listener.Addr().String())

	for i, config := range []struct{ name, text, adapter string }{
		{"caddyfile", caddyfile, "caddyfile"},
		{"json", jsonConfig, "json"},
	} {
		t.Run(config.name, func(t *testing.T) {
			tester := caddytest.NewTester(t)
			tester.InitServer(config.text, config.adapter)
			forged := hooktest.SignedEvent(t, fmt.Sprintf("evt_mon_strip_forged_%d", i), `{"type":"test"}`, time.Now(), "whsec_bm90IHRoZSBzZWNyZXQgYXQgYWxsISEh")
			valid := hooktest.SignedEvent(t, fmt.Sprintf("evt_mon_strip_%d", i), `{"type":"test"}`, time.Now(), hooktest.Secret)
			for _, ev := range []*hooktest.Event{forged, valid} {
				ev.Headers.Set("Hookgate-Verified", "forged-by-the-client")
				ev.Headers.Set("Hookgate-Event-Id", "evt_the_client_chose")
				ev.Headers.Set("Hookgate-Attempt", "7")
			}
			for _, step := range []struct {
				name     string
				ev       *hooktest.Event
				verified string
			}{
				{"a forged request", forged, ""},
				{"a genuine one", valid, "standard"},
			} {
				before := up.Total()
				hooktest.ExpectReply(t, step.name, send(t, tester.Client, step.ev), http.StatusOK, "upstream says hi")
				if up.Total() != before+1 {
					t.Fatalf("%s: the app got %d requests, want it handed on", step.name, up.Total()-before)
				}
				up.Mu.Lock()
				got := up.Headers[before]
				up.Mu.Unlock()
				wantID := ""
				if step.verified != "" {
					wantID = step.ev.ID
				}
				if got.Get("Hookgate-Verified") != step.verified || got.Get("Hookgate-Event-Id") != wantID || got.Get("Hookgate-Attempt") != "" {
					t.Errorf("%s: the app got Hookgate-Verified %q, Hookgate-Event-Id %q, Hookgate-Attempt %q; want %q, %q and none",
						step.name, got.Get("Hookgate-Verified"), got.Get("Hookgate-Event-Id"), got.Get("Hookgate-Attempt"), step.verified, wantID)
				}
			}
		})
	}
}
