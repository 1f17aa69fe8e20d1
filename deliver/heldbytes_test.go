package deliver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/hookgate/hookgate/dedupe"
)

// startDelivererHolding starts a deliverer whose bodies held are bounded by maxHeld bytes
// instead of maxHeldBytes: the same behaviour at a size a test can fill.
func startDelivererHolding(t *testing.T, out dedupe.Outbox, cfg Config, maxHeld int64) *Deliverer {
	t.Helper()
	d := New(out, testNamespace, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	d.maxHeld = maxHeld
	return run(t, d)
}

// peakHeld keeps the most bytes a deliverer reported holding.
type peakHeld struct {
	mu   sync.Mutex
	d    *Deliverer
	peak int64
}

func (p *peakHeld) sample() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.d != nil {
		p.peak = max(p.peak, p.d.Status().HeldBytes)
	}
}

func (p *peakHeld) max() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// While the upstream is stuck, a route holds no more bodies than its bound: with 16 workers and
// events of 64 KiB, a bound of 1 MiB lets 16 be sent and none wait leased ahead, where 48
// bodies would otherwise be held (16 sent, 32 leased ahead). Once the upstream answers, every
// event is delivered and nothing stays held.
func TestBodiesHeldStayWithinTheBoundWhileTheUpstreamIsStuck(t *testing.T) {
	t.Parallel()
	const workers, events, size, bound = 16, 100, 64 << 10, 1 << 20
	held := &peakHeld{}
	release := make(chan struct{})
	up := newUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		held.sample() // each attempt starts right after the Lease that brought its event
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	cfg := testConfig(t, up.URL)
	cfg.Workers = workers
	out := newFakeOutbox()
	body := strings.Repeat("x", size)
	for i := range events {
		out.add(testEvent(fmt.Sprintf("evt_%03d", i), body))
	}
	held.mu.Lock()
	held.d = startDelivererHolding(t, out, cfg, bound)
	held.mu.Unlock()

	waitFor(t, 10*time.Second, "an attempt for every worker", func() bool { return up.count() == workers })
	if leased := out.leased(testNamespace); leased*size > bound {
		t.Errorf("with the upstream stuck, %d events of %d KiB are leased (%d KiB), want at most the bound's %d KiB",
			leased, size>>10, leased*size>>10, bound>>10)
	}
	if n := held.d.Status().HeldBytes; n > bound {
		t.Errorf("with the upstream stuck, the deliverer holds %d KiB of bodies, want at most %d KiB", n>>10, bound>>10)
	}
	close(release)
	waitFor(t, 30*time.Second, "every event delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	t.Logf("at most %d KiB of bodies held, bound %d KiB; %d requests for %d events", held.max()>>10, bound>>10, up.count(), events)
	if peak := held.max(); peak > bound {
		t.Errorf("the deliverer held up to %d KiB of bodies, want at most %d KiB", peak>>10, bound>>10)
	}
	if n := held.d.Status().HeldBytes; n != 0 {
		t.Errorf("with everything delivered, the deliverer still holds %d bytes of bodies", n)
	}
}

// An event larger than the bound is not stuck behind it: when nothing else is held, it is
// leased and sent, and the smaller events behind it follow.
func TestAnEventLargerThanTheBoundIsDelivered(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	out := newFakeOutbox()
	big := testEvent("evt_big", strings.Repeat("b", dedupe.MaxPayload-4<<10))
	big.AcceptedAt = time.Now().Add(-time.Minute) // due first
	big.NextAttempt = big.AcceptedAt
	out.add(big)
	const small = 20
	for i := range small {
		out.add(testEvent(fmt.Sprintf("evt_small_%02d", i), strings.Repeat("s", 1<<10)))
	}
	d := startDelivererHolding(t, out, testConfig(t, up.URL), 1<<20)

	waitFor(t, 30*time.Second, "every event delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == small+1 })
	var got int
	for _, r := range up.received() {
		if r.Header.Get("Hookgate-Event-Id") == "evt_big" {
			got = len(r.Body)
		}
	}
	if want := len(big.Body); got != want {
		t.Errorf("the upstream got the large event's body of %d bytes, want %d", got, want)
	}
	if n := d.Status().HeldBytes; n != 0 {
		t.Errorf("with everything delivered, the deliverer still holds %d bytes of bodies", n)
	}
}

// An event whose attempt has ended holds no body while its outcome waits for a slow store:
// recording it needs only the event's identity and delivery fields.
func TestEventsBeingRecordedHoldNoBody(t *testing.T) {
	t.Parallel()
	const workers, size = 4, 64 << 10
	up := newUpstream(t, ok)
	out := &bodySeenOutbox{heldUpdateOutbox: newHeldUpdateOutbox(t)}
	cfg := testConfig(t, up.URL)
	cfg.Workers = workers
	const waiting = UnrecordedPerWorker * workers
	for i := range waiting {
		out.add(testEvent(fmt.Sprintf("evt_%d", i), strings.Repeat("x", size)))
	}
	d := startDelivererWithLogger(t, out, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))

	waitFor(t, 10*time.Second, "every outcome waiting for the store", func() bool { return out.arrived.Load() == waiting })
	if n, inFlight := d.Status().HeldBytes, d.Status().InFlight; n != 0 || inFlight != waiting {
		t.Errorf("with %d outcomes waiting for the store, the deliverer holds %d KiB of bodies (%d in flight), want none",
			waiting, n>>10, inFlight)
	}
	close(out.release)
	waitFor(t, 10*time.Second, "every event delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == waiting })
	if n := out.largestBody(); n != 0 {
		t.Errorf("an outcome was recorded with the event's body of %d bytes still attached", n)
	}
}

// bodySeenOutbox is a heldUpdateOutbox that notes the largest body an Update was given.
type bodySeenOutbox struct {
	*heldUpdateOutbox
	mu      sync.Mutex
	largest int
}

func (b *bodySeenOutbox) Update(ctx context.Context, ev *dedupe.Event, keep time.Duration) error {
	b.mu.Lock()
	b.largest = max(b.largest, len(ev.Body))
	b.mu.Unlock()
	return b.heldUpdateOutbox.Update(ctx, ev, keep)
}

func (b *bodySeenOutbox) largestBody() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.largest
}
