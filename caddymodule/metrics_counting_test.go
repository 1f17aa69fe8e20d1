package caddymodule

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	dto "github.com/prometheus/client_model/go"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// In sync mode, an upstream that answers 500 and then breaks off its body makes reverse_proxy
// panic with http.ErrAbortHandler: the claim is released (the app failed), so the provider's
// retry is handed on again. The first request was not accepted: counting it so counts one event
// accepted twice.
func TestAbortedUpstreamFailureCountedReleased(t *testing.T) {
	const route = "rvm12abort500"
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) > 1 {
			return
		}
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(up.Close)
	tester := startGateway(t, route, &hooktest.Upstream{Server: up})
	ev := hooktest.NewEvent(t, fmt.Sprintf("evt_rvm12_abort_%d", time.Now().UnixNano()), fmt.Sprintf("obj_rvm12_abort_%d", time.Now().UnixNano()), 1)
	awaitLoadSettled(t, tester.Client)
	first, err := trySend(tester.Client, ev)
	t.Logf("first try: %d %.60q, err %v", first.Status, first.Body, err)
	hooktest.ExpectReply(t, "the retry of an event the app failed", send(t, tester.Client, ev), http.StatusOK, "")
	got := scrape(t)
	accepted := `hookgate_requests_total{mode="enforce",outcome="accepted",reason="",route="` + route + `"}`
	released := `hookgate_requests_total{mode="enforce",outcome="released",reason="",route="` + route + `"}`
	if got[accepted] != 1 || got[released] != 1 {
		t.Errorf("one event failed by the app then taken on retry: accepted %v, released %v; want 1 and 1", got[accepted], got[released])
	}
}

// With `metrics off`, nothing is counted: the Badger ledger's group commits neither, although
// the store was opened by a config that counted (stores outlive a reload).
func TestMetricsOffCountsNoCommits(t *testing.T) {
	const route = "rvm12offcommits"
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(up.Close)
	on := gatewayConfig(route, unusedUpstream, asyncRoute(up.Listener.Addr().String()))
	off := strings.Replace(on, "{\n", "{\n\thookgate {\n\t\tmetrics off\n\t}\n", 1)
	commits := func() uint64 {
		var m dto.Metric
		if err := ledgerCommitRequests.Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}

	tester := caddytest.NewTester(t)
	tester.InitServer(on, "caddyfile")
	tester.InitServer(off, "caddyfile")
	before := commits()
	for i := range 3 {
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_rvm12_off_%d_%d", i, time.Now().UnixNano()), fmt.Sprintf("obj_rvm12_off_%d_%d", i, time.Now().UnixNano()), 1)
		hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "the deliveries", 10*time.Second, func() bool {
		status, body := admin(t, http.MethodGet, "/hookgate/status/"+route)
		return status == http.StatusOK && strings.Contains(body, `"backlog":0`)
	})
	if after := commits(); after != before {
		t.Errorf("with metrics off, 3 events accepted and delivered counted %d ledger commits", after-before)
	}
}

// A reload that drops a route drops its series even when a request on it is still being answered:
// Caddy does not wait for the old server's requests on a reload (only on exit), and the request,
// counted as it ends, must not bring the dropped route's series back for good.
func TestDroppedRouteSeriesStaysDroppedAfterInFlightRequest(t *testing.T) {
	// The upstream holds each request until the test releases it, after the reload.
	arrived := make(chan chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		release := make(chan struct{})
		select {
		case arrived <- release:
		case <-r.Context().Done():
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	tester := caddytest.NewTester(t)
	for i := range 2 {
		dropped := fmt.Sprintf("rvm12dropped%d", i)
		tester.InitServer(gatewayConfig(dropped, up.Listener.Addr().String()), "caddyfile")
		type answer struct {
			hooktest.Reply
			err error
		}
		answered := make(chan answer, 1)
		awaitLoadSettled(t, tester.Client)
		go func() {
			ev := hooktest.NewEvent(t, fmt.Sprintf("evt_rvm12_drop_%d_%d", i, time.Now().UnixNano()), fmt.Sprintf("obj_rvm12_drop_%d_%d", i, time.Now().UnixNano()), 1)
			got, err := trySend(tester.Client, ev)
			answered <- answer{got, err}
		}()
		var release chan struct{}
		select {
		case release = <-arrived:
		case got := <-answered:
			t.Fatalf("round %d: the request was answered (%d, %v) before it reached the upstream", i, got.Status, got.err)
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the request never reached the upstream", i)
		}
		tester.InitServer(gatewayConfig(fmt.Sprintf("rvm12kept%d", i), up.Listener.Addr().String()), "caddyfile")
		select {
		case got := <-answered:
			t.Fatalf("round %d: the request was answered (%d, %v) before the reload ended, so it was not in flight across it", i, got.Status, got.err)
		default:
		}
		close(release)
		var got answer
		select {
		case got = <-answered:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the in-flight request was never answered", i)
		}
		if got.err != nil || got.Status != http.StatusOK {
			t.Fatalf("round %d: the request in flight across the reload got %d, %v; want the upstream's 200", i, got.Status, got.err)
		}
		for name := range scrape(t) {
			if strings.Contains(name, `route="`+dropped+`"`) {
				t.Fatalf("round %d: after the reload dropped route %s and its in-flight request ended, /metrics shows %s", i, dropped, name)
			}
		}
	}
}
