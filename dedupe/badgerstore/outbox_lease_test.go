package badgerstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

func TestLease(t *testing.T) {
	b := openTest(t)
	sec := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	// Accepted out of due order; e9 is not due until long after the others.
	for _, n := range []int{3, 1, 5, 2, 4} {
		enqueue(t, b, queued(fmt.Sprint("e", n), sec(n)))
	}
	enqueue(t, b, queued("e9", sec(3600)))

	expectIDs(t, "nothing due yet", lease(t, b, sec(1).Add(-time.Nanosecond), 10, time.Minute), "")
	now := sec(10)
	first := lease(t, b, now, 3, time.Minute)
	expectIDs(t, "earliest three", first, "e1,e2,e3")
	for _, ev := range first {
		if !ev.NextAttempt.Equal(now.Add(time.Minute)) || ev.State != dedupe.Pending {
			t.Errorf("%s: next attempt %v, state %s; want %v, pending", ev.ID, ev.NextAttempt, ev.State, now.Add(time.Minute))
		}
	}
	expectIDs(t, "the rest that is due", lease(t, b, now, 10, time.Minute), "e4,e5")
	expectIDs(t, "all leased", lease(t, b, now, 10, time.Minute), "")
	expectIDs(t, "just before the leases end", lease(t, b, now.Add(time.Minute-time.Nanosecond), 10, time.Minute), "")
	// The worker that leased them died: they come due again.
	expectIDs(t, "when the leases end", lease(t, b, now.Add(time.Minute), 10, 2*time.Hour), "e1,e2,e3,e4,e5")
	expectIDs(t, "late event", lease(t, b, sec(3600), 10, time.Minute), "e9")
	if evs, err := b.Lease(context.Background(), "other", sec(3600), 10, time.Minute); len(evs) != 0 || err != nil {
		t.Errorf("another namespace leased [%s], %v", ids(evs), err)
	}
}

func TestConcurrentLeasesHandOutEachOnce(t *testing.T) {
	t.Run("Lease", func(t *testing.T) {
		b := openTest(t)
		leaseEach(t, b, b.Lease)
	})
	// Without taking turns, applying writes one at a time must keep it safe.
	t.Run("without turns", func(t *testing.T) {
		b := openTest(t)
		leaseEach(t, b, b.lease)
	})
}

type leaseFunc func(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error)

// leaseEach has 8 goroutines lease 200 events and checks each was handed out once.
func leaseEach(t *testing.T, b *Store, lease leaseFunc) {
	const events, workers = 200, 8
	for i := range events {
		enqueue(t, b, queued(fmt.Sprintf("evt_%03d", i), base))
	}
	var mu sync.Mutex
	got := make(map[string]int)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range workers {
		wg.Go(func() {
			<-start
			for {
				// An empty lease means every due event was taken by a commit
				// before this transaction began.
				evs, err := lease(context.Background(), "stripe", base, 5, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(evs) == 0 {
					return
				}
				mu.Lock()
				for _, ev := range evs {
					got[ev.ID]++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(got) != events {
		t.Errorf("%d distinct events handed out, want %d", len(got), events)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s handed out %d times", id, n)
		}
	}
}

// A process that dies mid-delivery leaves leased events behind; the next process to open the
// store makes them due at once instead of waiting out their leases.
func TestReopenRecoversLeasesOfADeadProcess(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	enqueue(t, b, queued("backing-off", now))
	enqueue(t, b, queued("in-flight", now))
	enqueue(t, b, queued("queued", now))
	leased := lease(t, b, time.Now(), 2, time.Hour)
	expectIDs(t, "leased before the crash", leased, "backing-off,in-flight")
	backoff := leased[0]
	backoff.Attempts, backoff.NextAttempt = 1, now.Add(time.Hour)
	update(t, b, backoff, time.Hour)
	b = reopen(t, b, dir)
	// The lease was never written: in-flight is due when it was before it was leased, with queued.
	expectIDs(t, "due right after reopen", lease(t, b, time.Now(), 10, time.Minute), "in-flight,queued")
}

// The due entry of an expired lease is left in place when the event is delivered or rescheduled
// (store), and a later Lease drops it without handing the event out again.
func TestLeaseDropsEntriesOfLeasesThatEnded(t *testing.T) {
	b := openTest(t)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	enqueue(t, b, queued("delivered", base))
	enqueue(t, b, queued("retried", base))
	evs := lease(t, b, base, 2, time.Minute)
	expectIDs(t, "first lease", evs, "delivered,retried")
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Hour)
	evs[1].NextAttempt = at(2 * time.Minute)
	update(t, b, evs[1], time.Hour)
	expectIDs(t, "when the leases end", lease(t, b, at(90*time.Second), 10, time.Minute), "")
	evs = lease(t, b, at(2*time.Minute), 10, time.Minute)
	expectIDs(t, "at the retry", evs, "retried")
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Hour)
	expectIDs(t, "after every lease ended", lease(t, b, at(10*time.Minute), 10, time.Minute), "")
}
