package caddymodule

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/hookgate/hookgate/dedupe"
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
