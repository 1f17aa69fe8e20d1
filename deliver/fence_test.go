package deliver

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
)

// A worker whose lease ran out while the upstream was slow finds, when the upstream finally
// answers, that another worker took the event over and recorded its outcome: its own is dropped
// with a warning (not an error: nothing is wrong with the outbox), and the newer outcome stands.
func TestWorkerWhoseLeaseLapsedDropsItsOutcome(t *testing.T) {
	t.Parallel()
	out := newFakeOutbox()
	up, release := newBlockingUpstream(t)
	core, logs := observer.New(zap.InfoLevel)
	startDelivererWithLogger(t, out, testConfig(t, up.URL), zap.New(core))
	out.add(testEvent("e1", `{}`))
	waitFor(t, 5*time.Second, "the first attempt at the upstream", func() bool { return up.count() == 1 })

	// Another worker leases the event once the first lease has run out, and records a retry.
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	taken, err := out.Lease(ctx, testNamespace, later, 1, time.Minute)
	if err != nil || len(taken) != 1 {
		t.Fatalf("leasing the event after its lease: %d events, %v", len(taken), err)
	}
	newer := taken[0]
	newer.Attempts, newer.LastStatus, newer.LastError = 1, 503, "the newer holder's outcome"
	newer.NextAttempt = later.Add(time.Hour)
	if err := out.Update(ctx, newer, 0); err != nil {
		t.Fatal(err)
	}

	close(release) // the first worker's attempt is answered 200 at last
	waitFor(t, 5*time.Second, "the first worker's report", func() bool {
		return logs.FilterMessageSnippet("another worker took it over").Len() == 1
	})
	if got := out.event(testNamespace, "e1"); got.State != dedupe.Pending || got.LastError != "the newer holder's outcome" {
		t.Errorf("stored: %s, %q; want the newer holder's outcome", got.State, got.LastError)
	}
	if n := len(out.history("e1")); n != 1 {
		t.Errorf("%d updates stored, want only the newer holder's", n)
	}
	for _, entry := range logs.All() {
		if entry.Level >= zapcore.ErrorLevel {
			t.Errorf("logged at %s: %s %v", entry.Level, entry.Message, entry.ContextMap())
		}
	}
}
