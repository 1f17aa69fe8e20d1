package deliver

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/hookgate/hookgate/dedupe"
)

// watchedLeaseOutbox hands out the store's events under leases that leave usable to wait
// before an attempt must start (see usableLeaseOutbox), and watches the body of each event the
// first time it is leased, to tell when nothing holds it any longer.
type watchedLeaseOutbox struct {
	dedupe.Outbox
	timeout, usable time.Duration
	mu              sync.Mutex
	bodies          map[string]weak.Pointer[byte]
}

func (w *watchedLeaseOutbox) Lease(ctx context.Context, namespace string, now time.Time, n int, _ time.Duration) ([]*dedupe.Event, error) {
	evs, err := w.Outbox.Lease(ctx, namespace, now, n, w.timeout+startMargin+w.usable)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range evs {
		if _, seen := w.bodies[ev.ID]; !seen && len(ev.Body) > 0 {
			w.bodies[ev.ID] = weak.Make(&ev.Body[0])
		}
	}
	return evs, err
}

// freed reports whether the body the event was first leased with is no longer held by anything.
func (w *watchedLeaseOutbox) freed(id string) bool {
	w.mu.Lock()
	body, seen := w.bodies[id]
	w.mu.Unlock()
	runtime.GC()
	return seen && body.Value() == nil
}

// An event leased ahead that waited too long to start is left to its lease, and its body goes
// with it, though held_bytes no longer counts it: it is not kept in memory while another event
// of the same Lease is still in flight (Badger hands the events of a Lease out together).
func TestTheBodyOfAnEventLeftToItsLeaseIsFreedWhileAnotherOfItsLeaseIsInFlight(t *testing.T) {
	t.Parallel()
	store := openBadger(t)
	body := strings.Repeat("x", 256<<10)
	for i := range 2 {
		ev := testEvent(fmt.Sprintf("evt_%d", i), body)
		ev.AcceptedAt = ev.AcceptedAt.Add(time.Duration(i) * time.Millisecond)
		if _, err := store.Accept(context.Background(), dedupe.Claim{Namespace: testNamespace}, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	up, release := newBlockingUpstream(t)
	cfg := testConfig(t, up.URL)
	cfg.Workers = 1
	cfg.Timeout = 30 * time.Second // evt_0 stays in flight for the whole test
	out := &watchedLeaseOutbox{Outbox: store, timeout: cfg.Timeout, usable: 200 * time.Millisecond, bodies: map[string]weak.Pointer[byte]{}}
	d := startDelivererWithLogger(t, out, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	t.Cleanup(func() { close(release) }) // before the deliverer's Stop: cleanups run last first

	waitFor(t, 10*time.Second, "evt_1 leased ahead, then left to its lease", func() bool {
		return up.count() == 1 && d.Status().HeldBytes == int64(len(body))
	})
	waitFor(t, 10*time.Second, "the body of evt_1, left to its lease, freed", func() bool { return out.freed("evt_1") })
	if out.freed("evt_0") {
		t.Errorf("the body of evt_0, in flight, was freed")
	}
}
