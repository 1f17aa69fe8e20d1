package caddymodule

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

)

// In sync mode, an upstream that answers 500 and then breaks off its body makes reverse_proxy
// panic with http.ErrAbortHandler: the claim is released (the app failed), so the provider's
// retry is handed on again. The first request was not accepted: counting it so counts one event
// accepted twice.
func TestReviewM12AbortedFailureCountedReleased(t *testing.T) {
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
	tester := startGateway(t, route, &upstream{Server: up})
	ev := newEvent(t, fmt.Sprintf("evt_rvm12_abort_%d", time.Now().UnixNano()), fmt.Sprintf("obj_rvm12_abort_%d", time.Now().UnixNano()), 1)
	first, err := trySend(tester.Client, ev)
	t.Logf("first try: %d %.60q, err %v", first.status, first.body, err)
	expectReply(t, "the retry of an event the app failed", send(t, tester.Client, ev), http.StatusOK, "")
	got := scrape(t)
	accepted := `hookgate_requests_total{outcome="accepted",reason="",route="` + route + `"}`
	released := `hookgate_requests_total{outcome="released",reason="",route="` + route + `"}`
	if got[accepted] != 1 || got[released] != 1 {
		t.Errorf("one event failed by the app then taken on retry: accepted %v, released %v; want 1 and 1", got[accepted], got[released])
	}
}
