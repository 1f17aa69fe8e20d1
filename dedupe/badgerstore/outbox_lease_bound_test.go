package badgerstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Events delivered within their lease leave their lease-expiry due entries behind (store). When
// a pause of Leases (a restart, say) lets those of more than 10k events come due at once, Lease
// must get through them and hand out the event due after them: it used to delete them all in
// one transaction, which Badger refused (ErrTxnTooBig), and every Lease after it failed too.
func TestLeaseAfterManyDeliveredLeasesComeDue(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const drained = 12000
	enqueueMany(t, b, "drained", drained, base)
	deliverAll(t, b, drained)
	// Caddy restarts; a minute later every lease has run out, and the event accepted then is
	// due after them all.
	b = reopen(t, b, dir)
	later := base.Add(2 * time.Minute)
	enqueue(t, b, queued("after", later))
	var got []*dedupe.Event
	for calls := 0; len(got) == 0 && calls < 5; calls++ {
		got = append(got, lease(t, b, later, 16, time.Minute)...)
	}
	expectIDs(t, "the event after the drained ones", got, "after")
	expectIDs(t, "once", lease(t, b, later, 16, time.Minute), "")
}

// A deliverer with thousands of workers asks for thousands of events at once; each one leased
// is several writes, which together exceeded Badger's limit on a transaction.
func TestLeaseOfThousandsHandsOutEachOnce(t *testing.T) {
	b := openTest(t)
	const events = 5000
	enqueueMany(t, b, "bulk", events, base)
	got := make(map[string]int)
	for calls := 0; len(got) < events; calls++ {
		if calls == events {
			t.Fatalf("%d of %d events leased after %d calls", len(got), events, calls)
		}
		evs := lease(t, b, base, events, time.Hour)
		if len(evs) == 0 {
			t.Fatalf("%d of %d events leased, then none", len(got), events)
		}
		for _, ev := range evs {
			got[ev.ID]++
		}
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s handed out %d times", id, n)
		}
	}
	expectIDs(t, "after all were leased", lease(t, b, base, events, time.Hour), "")
}

// enqueueMany accepts n events named prefix-i due at at, from concurrent callers so that they
// share group commits.
func enqueueMany(t testing.TB, b *Store, prefix string, n int, at time.Time) {
	t.Helper()
	concurrently(t, n, func(i int) error {
		ev := queued(fmt.Sprintf("%s-%05d", prefix, i), at)
		_, err := b.Accept(context.Background(), dedupe.Claim{Namespace: ev.Namespace}, ev, time.Hour)
		return err
	})
}

// deliverAll leases the outbox's events 256 at a time and marks each delivered, until n are.
func deliverAll(t testing.TB, b *Store, n int) {
	t.Helper()
	for delivered := 0; delivered < n; {
		evs := lease(t, b, base, 256, time.Minute)
		if len(evs) == 0 {
			t.Fatalf("%d of %d events leased, then none", delivered, n)
		}
		markDelivered(t, b, evs)
		delivered += len(evs)
	}
}

// markDelivered records every event as delivered, concurrently.
func markDelivered(t testing.TB, b *Store, evs []*dedupe.Event) {
	t.Helper()
	concurrently(t, len(evs), func(i int) error {
		evs[i].State = dedupe.Delivered
		return b.Update(context.Background(), evs[i], time.Hour)
	})
}

// concurrently runs do(0..n-1) on 64 goroutines and fails the test on the first error.
func concurrently(t testing.TB, n int, do func(i int) error) {
	t.Helper()
	const callers = 64
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := c; i < n; i += callers {
				if err := do(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// A Lease reads every body it hands out into memory, and its caller guesses their size from the
// last ones: one Lease asked for 12 events of 2 MiB, after small ones, hands out 16 MiB of bodies
// (the first always goes, and the one that reaches the bound), not 24; the next Lease the rest.
func TestLeaseHandsOutAtMost16MiBOfBodies(t *testing.T) {
	b := openTest(t)
	const events, size = 12, 2 << 20
	for i := range events {
		ev := queued(fmt.Sprintf("large-%02d", i), base)
		ev.Body = make([]byte, size)
		enqueue(t, b, ev)
	}
	first := lease(t, b, base, events, time.Hour)
	bodies := 0
	for _, ev := range first {
		bodies += len(ev.Body)
	}
	if len(first) != leaseBytes/size {
		t.Errorf("one Lease of %d events of %d MiB handed out %d (%d MiB of bodies), want %d (%d MiB)",
			events, size>>20, len(first), bodies>>20, leaseBytes/size, leaseBytes>>20)
	}
	rest := lease(t, b, base, events, time.Hour)
	if len(first)+len(rest) != events {
		t.Errorf("two Leases handed out %d and %d of %d events", len(first), len(rest), events)
	}
}
