package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// In sync mode, an upstream that answers 200 and then breaks off its body makes reverse_proxy
// panic with http.ErrAbortHandler (Caddy's reverseproxy.go, "aborting with incomplete
// response"): the handler's settle never runs, so the claim is neither done nor released. The
// provider's retry is answered 409 until the lease lapses, then handed on again although the
// app already took the event (it answered 200); meanwhile the request was counted accepted.
func TestUpstreamBreakingOffBodySettlesClaim(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) > 1 {
			return
		}
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(up.Close)
	tester := startGateway(t, "r12abort", &hooktest.Upstream{Server: up})
	ev := hooktest.NewEvent(t, "evt_r12_abort", "obj_r12_abort", 1)
	awaitLoadSettled(t, tester.Client)
	first, err := trySend(tester.Client, ev)
	t.Logf("first try: %d %.60q, err %v", first.Status, first.Body, err)
	retry := send(t, tester.Client, ev)
	if retry.Status == http.StatusConflict {
		t.Errorf("the provider's retry after the app answered 200 got %d %s: the claim was left in flight", retry.Status, retry.Body)
	}
	hooktest.ExpectReply(t, "the retry of an event the app answered 200", retry, http.StatusOK, `"duplicate":true`)
	if n := hits.Load(); n != 1 {
		t.Errorf("the app got the event %d times, want once", n)
	}
}
