package deliver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// heldUpdateOutbox is a store whose Updates wait until release is closed, as on a slow or
// stuck disk; it counts the Updates that arrived.
type heldUpdateOutbox struct {
	*fakeOutbox
	release chan struct{}
	arrived atomic.Int32
}

func newHeldUpdateOutbox(t *testing.T) *heldUpdateOutbox {
	t.Helper()
	return &heldUpdateOutbox{fakeOutbox: newFakeOutbox(), release: make(chan struct{})}
}

func (h *heldUpdateOutbox) Update(ctx context.Context, ev *dedupe.Event, keep time.Duration) error {
	h.arrived.Add(1)
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return h.fakeOutbox.Update(ctx, ev, keep)
}

// newWavesUpstream answers in waves of size requests: each request waits until its wave is
// complete, so a wave is answered only once size requests are in flight at once. Requests past
// the last wave are answered at once.
func newWavesUpstream(t *testing.T, size, waves int) *upstream {
	t.Helper()
	var mu sync.Mutex
	complete := make([]chan struct{}, waves)
	for i := range complete {
		complete[i] = make(chan struct{})
	}
	return newUpstream(t, func(n int, _ http.ResponseWriter, r *http.Request) {
		wave := (n - 1) / size
		if wave >= waves {
			return
		}
		mu.Lock()
		if n%size == 0 {
			close(complete[wave])
		}
		mu.Unlock()
		select {
		case <-complete[wave]:
		case <-r.Context().Done():
		}
	})
}

// Recording an outcome does not hold the upstream's slot: while the first attempts' outcomes
// wait on a slow store, the next attempts already run, as many at once as there are workers.
func TestAttemptsGoOnWhileOutcomesAreRecorded(t *testing.T) {
	t.Parallel()
	const workers, events = 4, 20
	up := newWavesUpstream(t, workers, 2)
	out := newHeldUpdateOutbox(t)
	for i := range events {
		out.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	cfg := testConfig(t, up.URL)
	cfg.Workers = workers
	startDelivererWithLogger(t, out, cfg, nil)
	released := sync.OnceFunc(func() { close(out.release) })
	t.Cleanup(released)

	waitFor(t, 5*time.Second, "a second wave of 4 attempts at once while the first wave's outcomes wait on the store",
		func() bool { return up.count() >= 2*workers })
	if n := out.count(testNamespace, dedupe.Delivered); n != 0 {
		t.Fatalf("%d outcomes recorded while the store was held", n)
	}
	released()
	waitFor(t, 5*time.Second, "all delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	if peak := up.peakInFlight(); peak > workers {
		t.Errorf("peak %d requests in flight, want at most %d workers", peak, workers)
	}
	if n := up.count(); n != events {
		t.Errorf("upstream got %d requests for %d events", n, events)
	}
}

// A store that cannot record outcomes stops the attempts after a bound (UnrecordedPerWorker ×
// the workers, in flight or waiting on the store), rather than sending events it cannot record,
// which would come due again and be sent again. Under a rate limit, kept in this process or
// shared by the nodes, attempts go on up to the same bound.
func TestAttemptsStopWhenOutcomesCannotBeRecorded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rate   Rate
		shared bool
	}{
		{name: "no rate"},
		{name: "rate", rate: Rate{Starts: 200, Per: time.Second}},
		{name: "rate shared by nodes", rate: Rate{Starts: 200, Per: time.Second}, shared: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const workers, events = 4, 50
			const bound = UnrecordedPerWorker * workers
			up := newUpstream(t, ok)
			held := newHeldUpdateOutbox(t)
			var out dedupe.Outbox = held
			if tc.shared {
				out = &sharedStartsOutbox{heldUpdateOutbox: held}
			}
			for i := range events {
				held.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
			}
			cfg := testConfig(t, up.URL)
			cfg.Workers = workers
			cfg.Rate = tc.rate
			d := startDelivererWithLogger(t, out, cfg, nil)
			released := sync.OnceFunc(func() { close(held.release) })
			t.Cleanup(released)

			// Waited for up to a while, not failed at once: what was attempted then is the finding.
			for deadline := time.Now().Add(10 * time.Second); held.arrived.Load() < bound && time.Now().Before(deadline); {
				time.Sleep(2 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // room for one more attempt, which must not come
			if n, waiting, inFlight := up.count(), held.arrived.Load(), d.Status().InFlight; n != bound || waiting != bound || inFlight != bound {
				t.Errorf("with the store stuck: %d attempts, %d outcomes waiting, status says %d in flight; want %d of each", n, waiting, inFlight, bound)
			}
			released()
			waitFor(t, 10*time.Second, "all delivered", func() bool { return held.count(testNamespace, dedupe.Delivered) == events })
			if n := up.count(); n != events {
				t.Errorf("upstream got %d requests for %d events", n, events)
			}
		})
	}
}

// shortLeaseOutbox hands out its first lease with only a second to run: too little for an
// attempt (2 s) and the recording of its outcome.
type shortLeaseOutbox struct {
	*fakeOutbox
	once sync.Once
}

func (s *shortLeaseOutbox) Lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
	s.once.Do(func() { lease = time.Second })
	return s.fakeOutbox.Lease(ctx, namespace, now, n, lease)
}

// An event whose lease has too little left to finish an attempt is not sent under it: another
// worker may take it over once the lease ends, and the upstream would get it twice at once.
// It is left to lapse and sent under its next lease.
func TestEventsWithTooLittleLeaseLeftAreNotSent(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	out := &shortLeaseOutbox{fakeOutbox: newFakeOutbox()}
	out.add(testEvent("evt_short_lease", "{}"))
	startDelivererWithLogger(t, out, testConfig(t, up.URL), nil)

	waitFor(t, 5*time.Second, "the event delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == 1 })
	if n := up.count(); n != 1 {
		t.Errorf("upstream got the event %d times, want once", n)
	}
	if h := out.history("evt_short_lease"); len(h) != 1 || h[0].LeaseToken != 2 {
		t.Errorf("updates %+v, want one, under the second lease", h)
	}
}

// Events leased ahead, not yet started, are left to their leases when the deliverer stops:
// none is sent or changed, and each comes due again once its lease ends.
func TestStopLeavesEventsLeasedAheadToComeDueAgain(t *testing.T) {
	t.Parallel()
	up, release := newBlockingUpstream(t)
	t.Cleanup(func() { close(release) })
	fake := newFakeOutbox()
	const events = 10
	for i := range events {
		fake.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	const workers = 2
	cfg := testConfig(t, up.URL)
	cfg.Workers = workers
	d := New(fake, testNamespace, cfg, nil)
	d.Start()
	waitFor(t, 5*time.Second, "2 attempts in flight and 4 events leased ahead", func() bool {
		return up.count() == workers && fake.leased(testNamespace) == workers+leaseAhead*workers
	})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = d.Stop(ctx) // abandons the 2 attempts in flight
	if n := up.count(); n != workers {
		t.Errorf("upstream got %d requests, want only the 2 in flight at Stop", n)
	}
	for i := range events {
		id := fmt.Sprintf("evt_%02d", i)
		if h := fake.history(id); len(h) != 0 {
			t.Errorf("%s was updated %d times after Stop, want untouched", id, len(h))
		}
	}
	due, err := fake.Lease(context.Background(), testNamespace, time.Now().Add(time.Hour), events, time.Minute)
	if err != nil || len(due) != events {
		t.Errorf("once the leases ended, %d events came due (%v), want all %d", len(due), err, events)
	}
}

// An event leased ahead under settings a reload then replaced is sent with the new ones.
func TestEventsLeasedAheadUseTheSettingsOfTheirStart(t *testing.T) {
	t.Parallel()
	old, release := newBlockingUpstream(t)
	current := newUpstream(t, ok)
	fake := newFakeOutbox()
	fake.add(testEvent("evt_1", "{}"))
	fake.add(testEvent("evt_2", "{}"))
	cfg := testConfig(t, old.URL)
	cfg.Workers = 1
	d := startDeliverer(t, fake, cfg)
	waitFor(t, 5*time.Second, "one attempt in flight and the other event leased ahead", func() bool {
		return old.count() == 1 && fake.leased(testNamespace) == 2
	})

	cfg.Target = testConfig(t, current.URL).Target
	d.Configure(cfg)
	close(release)
	waitFor(t, 5*time.Second, "both delivered", func() bool { return fake.count(testNamespace, dedupe.Delivered) == 2 })
	if old.count() != 1 || current.count() != 1 {
		t.Errorf("the replaced upstream got %d requests, the new one %d; want 1 and 1", old.count(), current.count())
	}
}

// An entity stays in work until its event's outcome is recorded, not only until the upstream
// answers: the entity's next event waits, so the upstream gets them in order, and a supersede
// check after it sees the version just delivered.
func TestAnEntitysNextEventWaitsForTheOutcomeToBeRecorded(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	out := newHeldUpdateOutbox(t)
	v1 := testEvent("v1", "{}")
	v1.Entity, v1.Version = "cus_1", 1
	out.add(v1)
	d := startDelivererWithLogger(t, out, testConfig(t, up.URL), nil)
	released := sync.OnceFunc(func() { close(out.release) })
	t.Cleanup(released)
	waitFor(t, 5*time.Second, "v1's outcome waiting on the store", func() bool { return out.arrived.Load() == 1 })

	v2 := testEvent("v2", "{}")
	v2.Entity, v2.Version = "cus_1", 2
	out.add(v2)
	d.Notify()
	waitFor(t, 5*time.Second, "v2 handled while v1's outcome waits", func() bool { return out.arrived.Load() == 2 })
	if n := up.count(); n != 1 {
		t.Fatalf("upstream got %d requests before v1's outcome was recorded, want only v1", n)
	}
	released()
	waitFor(t, 5*time.Second, "both delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == 2 })
	if reqs := up.received(); reqs[0].Header.Get("Hookgate-Event-Id") != "v1" || reqs[1].Header.Get("Hookgate-Event-Id") != "v2" {
		t.Errorf("upstream got %s then %s, want v1 then v2", reqs[0].Header.Get("Hookgate-Event-Id"), reqs[1].Header.Get("Hookgate-Event-Id"))
	}
}

// sharedStartsOutbox is a heldUpdateOutbox that keeps the rate limit as a store shared by the
// nodes does (dedupe.StartLimiter).
type sharedStartsOutbox struct {
	*heldUpdateOutbox
	starts localStarts
}

func (s *sharedStartsOutbox) TakeStart(ctx context.Context, ns string, interval, ahead time.Duration) (time.Duration, error) {
	return s.starts.TakeStart(ctx, ns, interval, ahead)
}
