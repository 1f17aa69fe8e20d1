package deliver

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// usableLeaseOutbox hands out leases that leave only usable to wait before an attempt must
// start (timeout + startMargin + usable): a scaled-down picture of an upstream slower than the
// leases' 20 s of room, without waiting that long.
type usableLeaseOutbox struct {
	*fakeOutbox
	timeout, usable time.Duration
}

func (u *usableLeaseOutbox) Lease(ctx context.Context, namespace string, now time.Time, n int, _ time.Duration) ([]*dedupe.Event, error) {
	return u.fakeOutbox.Lease(ctx, namespace, now, n, u.timeout+startMargin+u.usable)
}

// A slow upstream does not make the events leased ahead lapse over and over: only as many are
// leased ahead as can start within their leases, so each event is leased about once, not
// leased and left to lapse again and again (each Lease is a synced write and reads the body).
func TestSlowUpstreamDoesNotLetEventsLeasedAheadLapse(t *testing.T) {
	t.Parallel()
	// An event leased ahead that waits for one attempt starts with 700 ms of its lease to spare,
	// so a loaded machine's scheduling delays do not make it lapse; one that waits for two does.
	const attemptTakes, usable = 800 * time.Millisecond, 1500 * time.Millisecond
	up := newUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) { sleepOrGone(r, attemptTakes) })
	cfg := testConfig(t, up.URL)
	const workers, events = 2, 24
	cfg.Workers = workers
	out := &usableLeaseOutbox{fakeOutbox: newFakeOutbox(), timeout: cfg.Timeout, usable: usable}
	for i := range events {
		out.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	startDelivererWithLogger(t, out, cfg, nil)

	waitFor(t, 30*time.Second, "all delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	leases := leasesTaken(out.fakeOutbox, events)
	// Before the first attempt ends nothing tells how long attempts take: of the first events
	// leased ahead (2×workers), those that wait for two attempts (the last workers) lapse once.
	t.Logf("%d events leased %d times in all", events, leases)
	if most := events + workers; leases > most {
		t.Errorf("%d events were leased %d times in all, want at most %d", events, leases, most)
	}
	if n := up.count(); n != events {
		t.Errorf("upstream got %d requests for %d events", n, events)
	}
}

// leasesTaken is how many times in all the events evt_00… of out were leased: each Lease hands
// an event the next lease token.
func leasesTaken(out *fakeOutbox, events int) int {
	leases := 0
	for i := range events {
		leases += int(out.event(testNamespace, fmt.Sprintf("evt_%02d", i)).LeaseToken)
	}
	return leases
}
