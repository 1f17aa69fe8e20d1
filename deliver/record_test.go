package deliver

import (
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// A slow store must not make a delivered event go out again: recording the outcome may take
// until the event's lease ends, not only a fixed few seconds.
func TestRecordingWaitsUntilTheLeaseEnds(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	out := newFakeOutbox()
	cfg := testConfig(t, up.URL)
	out.add(testEvent("evt_slow_store", `{}`))
	leased := time.Now()
	startDeliverer(t, out, cfg)

	waitFor(t, 5*time.Second, "the delivery to be recorded", func() bool {
		return out.event(testNamespace, "evt_slow_store").State == dedupe.Delivered
	})
	leaseEnd := leased.Add(cfg.Timeout + leaseMargin)
	deadlines := out.updateDeadlines()
	if len(deadlines) != 1 {
		t.Fatalf("%d updates, want 1", len(deadlines))
	}
	if deadlines[0].Before(leaseEnd) {
		t.Fatalf("the outcome's write gives up %v after the attempt, %v before the lease ends",
			time.Until(deadlines[0]).Round(time.Second), leaseEnd.Sub(deadlines[0]).Round(time.Second))
	}
}
