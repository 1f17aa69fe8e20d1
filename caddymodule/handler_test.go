package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/caddymodule/ledgerpool"
	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
)

// settleRecorder is an instantStore that keeps the context its Done was given, and whether that
// context had already ended.
type settleRecorder struct {
	instantStore
	ctx   context.Context
	ended error
}

func (s *settleRecorder) Done(ctx context.Context, _ dedupe.Claim, _ time.Duration) error {
	s.ctx, s.ended = ctx, ctx.Err()
	return nil
}

// A provider that hangs up while the app works does not keep the event from being marked done:
// the app took it. Done's context is not the request's, and still ends within about 10 s.
func TestSettleOutlivesTheRequestWithinItsBound(t *testing.T) {
	var hangUp context.CancelFunc
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		hangUp() // the provider is gone before the app answers
		w.WriteHeader(http.StatusOK)
		return nil
	})
	f := newRequestPathFixture(t, false, next)
	ledger := &settleRecorder{}
	f.h.ledger = ledger
	before := time.Now()
	r := f.request()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	hangUp = cancel
	w := &discardWriter{header: make(http.Header)}
	if err := f.h.ServeHTTP(w, r.WithContext(ctx), f.next); err != nil || w.status != http.StatusOK {
		t.Fatalf("answered %d, %v; want 200", w.status, err)
	}
	after := time.Now()
	if ledger.ctx == nil {
		t.Fatal("the event was never marked done")
	}
	if ledger.ended != nil {
		t.Errorf("Done was given a context that had ended (%v) when the provider hung up", ledger.ended)
	}
	deadline, bounded := ledger.ctx.Deadline()
	if earliest, latest := before.Add(settleTimeout-settleRenewal), after.Add(settleTimeout); !bounded || deadline.Before(earliest) || deadline.After(latest) {
		t.Errorf("Done's deadline %v (bounded %v), want between %v and %v", deadline, bounded, earliest, latest)
	}
}

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

// A provider that hangs up while its accept waits for the ledger's group commit ends the
// request's context: Badger answers context.Canceled. The ledger is fine, so this must not be
// counted as busy{reason="ledger_unavailable"} (what docs/operations.md says to alert on) nor logged
// at ERROR as a ledger failure, once per such request.
func TestProviderHangingUpIsNotLedgerDown(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := &Handler{Name: "r12hangup", logger: zap.New(core)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodPost, "/hooks/x", nil).WithContext(ctx)
	out := newOutcome(httptest.NewRecorder(), req)
	h.answerUnlessNew(out, "accept", dedupe.Claimed, fmt.Errorf("dedupe: accept: %w", context.Canceled))
	if out.class == reasonLedgerDown {
		t.Errorf("a provider hanging up is counted as outcome %q, reason %q", out.result, out.class)
	}
	for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
		t.Errorf("a provider hanging up is logged at ERROR: %q %v", e.Message, e.ContextMap())
	}
}

// What the provider sees of a refusal: 503, Retry-After and the reason in words; no log line per
// request (the cause was logged once).
func TestUnavailableLedgerAnswers503WithReason(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	h := &Handler{Name: "r", logger: zap.New(core)}
	for _, cause := range []*ledgerpool.Unavailable{ledgerpool.ErrDiskLow, ledgerpool.ErrDiskFull, ledgerpool.ErrLedgerLocked, ledgerpool.ErrLedgerNotOpened, ledgerpool.ErrRedisDown, ledgerpool.ErrRedisFull} {
		rec := httptest.NewRecorder()
		out := newOutcome(rec, httptest.NewRequest(http.MethodPost, "/hooks", nil))
		answered, _ := h.answerUnlessNew(out, "accept", 0, fmt.Errorf("wrapped: %w", cause))
		if !answered || rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), cause.Reason) {
			t.Fatalf("%s: got %d Retry-After %q %s", cause.Reason, rec.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
	}
	if logs.Len() != 0 {
		t.Fatalf("refusals logged per request: %v", logs.All())
	}
}
