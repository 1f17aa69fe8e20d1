package deliver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
)

func TestStopWaitsForAttemptsInFlight(t *testing.T) {
	t.Parallel()
	up, release := newBlockingUpstream(t)
	fake := newFakeOutbox()
	fake.add(testEvent("evt_1", "{}"))
	d := startDeliverer(t, fake, testConfig(t, up.URL))
	waitFor(t, 5*time.Second, "the attempt in flight", func() bool { return up.count() == 1 })

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		stopped <- d.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while an attempt was in flight", err)
	case <-time.After(150 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return after the attempt finished")
	}
	if got := fake.event(testNamespace, "evt_1"); got.State != dedupe.Delivered {
		t.Errorf("the attempt in flight at Stop ended %s, want delivered", got.State)
	}
	if n := d.Status().InFlight; n != 0 {
		t.Errorf("after Stop, %d in flight", n)
	}

	leases := fake.leaseCalls()
	fake.add(testEvent("evt_2", "{}"))
	d.Notify()
	d.Start() // a stopped deliverer stays stopped
	time.Sleep(300 * time.Millisecond)
	if n, calls := up.count(), fake.leaseCalls(); n != 1 || calls != leases {
		t.Errorf("after Stop: %d requests, %d more leases; want no more of either", n, calls-leases)
	}
}

func TestStopAbandonsAttemptsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) { sleepOrGone(r, 10*time.Second) })
	fake := newFakeOutbox()
	fake.add(testEvent("evt_1", "{}"))
	d := startDeliverer(t, fake, testConfig(t, up.URL))
	waitFor(t, 5*time.Second, "the attempt in flight", func() bool { return up.count() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	started := time.Now()
	err := d.Stop(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop = %v, want the context's deadline error", err)
	}
	if took := time.Since(started); took > 2*time.Second {
		t.Errorf("Stop took %v with a 100ms context", took)
	}
	if n := d.Status().InFlight; n != 0 {
		t.Errorf("after Stop, %d still in flight", n)
	}
	// Nothing is known of the abandoned attempt: the event stays leased, to come due again.
	if got := fake.event(testNamespace, "evt_1"); got.State != dedupe.Pending || got.Attempts != 0 || len(fake.history("evt_1")) != 0 {
		t.Errorf("abandoned event = %s after %d attempts, %d updates; want pending and untouched",
			got.State, got.Attempts, len(fake.history("evt_1")))
	}
}

// Not parallel: it counts the process's goroutines.
func TestStopLeavesNoGoroutinesBehind(t *testing.T) {
	baseline := runtime.NumGoroutine()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Hookgate-Attempt") == "1" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	fake := newFakeOutbox()
	for i := range 20 {
		fake.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	d := New(fake, testNamespace, testConfig(t, up.URL), zap.NewNop())
	d.Start()
	waitFor(t, 5*time.Second, "all delivered", func() bool { return fake.count(testNamespace, dedupe.Delivered) == 20 })
	if err := d.Stop(context.Background()); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	up.Close()
	waitFor(t, 2*time.Second, fmt.Sprintf("goroutines back to %d", baseline), func() bool {
		return runtime.NumGoroutine() <= baseline
	})
}

func TestStopBeforeStartAndTwice(t *testing.T) {
	t.Parallel()
	d := New(newFakeOutbox(), testNamespace, Config{}, zap.NewNop())
	if err := d.Stop(context.Background()); err != nil {
		t.Errorf("Stop before Start = %v", err)
	}
	if err := d.Stop(context.Background()); err != nil {
		t.Errorf("second Stop = %v", err)
	}
}

func TestIdleLoopPollsWithoutSpinning(t *testing.T) {
	t.Parallel()
	fake := newFakeOutbox()
	up := newUpstream(t, ok)
	d := startDeliverer(t, fake, testConfig(t, up.URL))
	time.Sleep(1500 * time.Millisecond)
	if calls := fake.leaseCalls(); calls < 2 || calls > 3 {
		t.Errorf("idle for 1.5s: %d leases, want the first and one or two polls", calls)
	}
	// Notified just after a poll, the event goes out at once: not a poll interval later, which
	// is when the next poll would find it. Counting from the poll leaves the notified Lease a
	// whole interval, however late a loaded machine runs it.
	polls := fake.leaseCalls()
	waitFor(t, 3*pollInterval, "the next poll", func() bool { return fake.leaseCalls() > polls })
	polled := fake.leaseTimes()[polls]
	fake.add(testEvent("evt_1", "{}"))
	d.Notify()
	waitFor(t, 3*pollInterval, "the notified event to go out", func() bool {
		return fake.count(testNamespace, dedupe.Delivered) == 1
	})
	leases := fake.leaseTimes()
	if handedOut := leases[polls+1]; handedOut.Sub(polled) >= pollInterval {
		t.Errorf("the notified event was leased %v after the poll before it, want sooner than the next poll (%v)",
			handedOut.Sub(polled).Round(time.Millisecond), pollInterval)
	}
}

func TestLeaseErrorsBackOff(t *testing.T) {
	t.Parallel()
	fake := newFakeOutbox()
	fake.setLeaseErr(errors.New("disk on fire"))
	fake.add(testEvent("evt_1", "{}"))
	up := newUpstream(t, ok)
	d := startDeliverer(t, fake, testConfig(t, up.URL))
	waitFor(t, 3*time.Second, "the first Lease", func() bool { return fake.leaseCalls() == 1 })
	// Notified over and over for half of the first backoff (pollInterval), counted from the
	// failed Lease on: a loaded machine's late wake-ups shorten the notifying, never lengthen it.
	for failed := time.Now(); time.Since(failed) < pollInterval/2; {
		d.Notify()
		time.Sleep(10 * time.Millisecond)
	}
	if calls := fake.leaseCalls(); calls != 1 {
		t.Errorf("after a failed Lease and %v of Notify: %d leases, want 1 (backing off)", pollInterval/2, calls)
	}
	fake.setLeaseErr(nil)
	waitFor(t, 3*time.Second, "delivery once Lease works again", func() bool {
		return fake.count(testNamespace, dedupe.Delivered) == 1
	})
}

func TestInvalidConfigHoldsDeliveries(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	fake := newFakeOutbox()
	fake.add(testEvent("evt_1", "{}"))
	valid := testConfig(t, up.URL)
	invalid := valid
	invalid.Target = nil
	d := startDeliverer(t, fake, invalid)
	time.Sleep(100 * time.Millisecond)
	if calls := fake.leaseCalls(); calls != 0 {
		t.Errorf("with no target: %d leases, want none", calls)
	}

	d.Configure(valid)
	waitFor(t, 3*time.Second, "delivery once the config is valid", func() bool {
		return fake.count(testNamespace, dedupe.Delivered) == 1
	})

	d.Configure(invalid) // ignored: the valid one stays
	fake.add(testEvent("evt_2", "{}"))
	d.Notify()
	waitFor(t, 3*time.Second, "delivery after an invalid reconfiguration", func() bool {
		return fake.count(testNamespace, dedupe.Delivered) == 2
	})
}

// Stop gives outcomes already being recorded outboxTimeout once it abandons the attempts, as
// it says, not until their leases end (the attempt's timeout plus 30 s): a store that hangs
// does not hold a reload or a shutdown that long.
func TestStopGivesUpOnAStoreThatHangs(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	out := newHeldUpdateOutbox(t)
	for i := range 4 {
		out.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	cfg := testConfig(t, up.URL)
	cfg.Workers = 2
	d := New(out, testNamespace, cfg, nil)
	d.Start()
	waitFor(t, 5*time.Second, "4 outcomes waiting on the store", func() bool { return out.arrived.Load() >= 4 })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- d.Stop(ctx) }()
	select {
	case err := <-stopped:
		if err == nil {
			t.Errorf("Stop with outcomes stuck in the store returned no error")
		}
	case <-time.After(outboxTimeout + 5*time.Second):
		close(out.release) // let Stop end
		<-stopped
		t.Errorf("Stop did not return within %v of abandoning the attempts", outboxTimeout+5*time.Second)
	}
}
