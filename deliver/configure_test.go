package deliver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// heldLeaseOutbox holds its first Lease call until release is closed, once it has said so on
// leasing: a reload (Configure) can then land while the lease loop waits on the store.
type heldLeaseOutbox struct {
	*fakeOutbox
	leasing, release chan struct{}
	held             bool
}

func (h *heldLeaseOutbox) Lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
	if !h.held { // only the lease loop calls Lease, one call at a time
		h.held = true
		close(h.leasing)
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.fakeOutbox.Lease(ctx, namespace, now, n, lease)
}

// An event leased while a reload swaps the settings is sent with the new ones: once Configure
// returns, no attempt starts with the settings it replaced (a rotated resign secret, a moved
// upstream), even if the store answers the lease only afterwards.
func TestEventsLeasedAcrossConfigureUseTheNewSettings(t *testing.T) {
	t.Parallel()
	old, current := newUpstream(t, ok), newUpstream(t, ok)
	out := &heldLeaseOutbox{fakeOutbox: newFakeOutbox(), leasing: make(chan struct{}), release: make(chan struct{})}
	out.add(testEvent("evt_leased_across_reload", "{}"))
	d := startDelivererWithLogger(t, out, testConfig(t, old.URL), nil)

	<-out.leasing
	d.Configure(testConfig(t, current.URL))
	close(out.release)
	waitFor(t, 5*time.Second, "the event delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == 1 })
	if old.count() != 0 || current.count() != 1 {
		t.Fatalf("the replaced settings' upstream got %d requests, the new one %d; want 0 and 1", old.count(), current.count())
	}
}

// The new settings' timeout applies to an event leased across Configure only up to the one its
// lease was sized for: a longer one could outlast the lease and send the event twice.
func TestEventsLeasedAcrossConfigureKeepTheirLeasesTimeout(t *testing.T) {
	t.Parallel()
	up, release := newBlockingUpstream(t)
	out := &heldLeaseOutbox{fakeOutbox: newFakeOutbox(), leasing: make(chan struct{}), release: make(chan struct{})}
	out.add(testEvent("evt_timeout_across_reload", "{}"))
	cfg := testConfig(t, up.URL)
	cfg.Timeout = 100 * time.Millisecond
	d := startDelivererWithLogger(t, out, cfg, nil)
	// The retry is sent with the new hour-long timeout: the upstream answers it before the
	// deliverer's Stop (cleanups run last first), which would otherwise wait on it.
	t.Cleanup(func() { close(release) })

	<-out.leasing
	cfg.Timeout = time.Hour
	d.Configure(cfg)
	close(out.release)
	waitFor(t, 5*time.Second, "the attempt recorded", func() bool { return len(out.history("evt_timeout_across_reload")) == 1 })
	if got := out.history("evt_timeout_across_reload")[0].LastError; !strings.Contains(got, "within 100ms") {
		t.Fatalf("attempt recorded %q; want it timed out after the 100ms its lease was made for", got)
	}
}
