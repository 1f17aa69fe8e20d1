package deliver

import (
	"net/http"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// On a disk below its watermark the outbox refuses to dead-letter (a dead letter stores its
// body again: dedupe.ErrNoRoom). The event must not be lost or left leased: it stays pending,
// due again a minute later, with the reason it would have died for, and dies once there is room.
func TestDeadLetteringWithoutRoomKeepsTheEventPending(t *testing.T) {
	t.Parallel()
	out := newFakeOutbox()
	out.noRoom = true
	up := newUpstream(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	})
	startDeliverer(t, out, testConfig(t, up.URL))
	out.add(testEvent("e1", `{}`))
	waitFor(t, 5*time.Second, "the attempt's outcome", func() bool { return len(out.history("e1")) == 1 })
	got := out.event(testNamespace, "e1")
	if got.State != dedupe.Pending || got.LastStatus != http.StatusBadRequest || time.Until(got.NextAttempt) < 50*time.Second {
		t.Fatalf("after a 400 with no room to dead-letter: %s, status %d, due in %v; want pending, 400, due in about %v",
			got.State, got.LastStatus, time.Until(got.NextAttempt).Round(time.Second), noRoomDelay)
	}
	if n := up.count(); n != 1 {
		t.Fatalf("upstream got %d requests, want 1 (the next attempt waits %v)", n, noRoomDelay)
	}
}
