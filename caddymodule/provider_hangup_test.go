package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
)

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
