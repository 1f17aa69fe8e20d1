package badgerstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// A Lease commits nothing and leaves the event on disk as it was accepted, yet the event is not
// handed out again within its lease, and Get shows the lease.
func TestLeaseIsNotWrittenYetHoldsTheEvent(t *testing.T) {
	b := openTest(t)
	enqueue(t, b, queued("e", base))
	commits := b.commits.groups.Load()
	evs := lease(t, b, base, 1, time.Minute)
	expectIDs(t, "lease", evs, "e")
	if n := b.commits.groups.Load() - commits; n != 0 {
		t.Errorf("the lease took %d commits", n)
	}
	ok, _ := keysFor("stripe", "e")
	err := b.db.View(func(txn *badger.Txn) error {
		rec, _, err := getRecord(txn, ok.record, b.clock())
		if err == nil && (rec.Leased || rec.Leases != 0 || !rec.NextAttempt.Equal(base)) {
			t.Errorf("record on disk: leased %v, %d leases, due %v; want it as accepted", rec.Leased, rec.Leases, rec.NextAttempt)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	expectLeased(t, b, "leased index", "")
	expectIDs(t, "within the lease", lease(t, b, base.Add(time.Minute-time.Nanosecond), 10, time.Minute), "")
	got, err := b.Get(context.Background(), "stripe", "e")
	if err != nil {
		t.Fatal(err)
	}
	if !got.NextAttempt.Equal(base.Add(time.Minute)) || got.LeaseToken != evs[0].LeaseToken {
		t.Errorf("Get: due %v, token %d; want the lease's end %v and token %d", got.NextAttempt, got.LeaseToken, base.Add(time.Minute), evs[0].LeaseToken)
	}
}

// Reopen (after the store failed) keeps the leases of this process's deliverers: the event is
// not handed out again within its lease, and once it lapsed and was leased again the earlier
// holder is fenced off.
func TestReopenKeepsLeasesAndFencesEarlierHolders(t *testing.T) {
	b, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, b, queued("e", base))
	first := lease(t, b, base, 1, time.Minute)
	expectIDs(t, "before", first, "e")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Reopen(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	expectIDs(t, "within the lease, after Reopen", lease(t, b, base.Add(30*time.Second), 1, time.Minute), "")
	second := lease(t, b, base.Add(time.Minute), 1, time.Minute)
	expectIDs(t, "once it lapsed", second, "e")
	if len(second) == 1 && second[0].LeaseToken == first[0].LeaseToken {
		t.Fatalf("both leases have token %d", first[0].LeaseToken)
	}
	first[0].State = dedupe.Delivered
	if err := b.Update(context.Background(), first[0], time.Hour); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("the earlier holder's Update: %v, want ErrLeaseLost", err)
	}
	second[0].State = dedupe.Delivered
	update(t, b, second[0], time.Hour)
}

// A lapsed lease, found in memory, is handed out again among the events the due index holds, in
// due order: its due time is its lease's end.
func TestLapsedLeaseIsHandedOutInDueOrder(t *testing.T) {
	b := openTest(t)
	enqueue(t, b, queued("lapsed", base))
	expectIDs(t, "first lease", lease(t, b, base, 1, time.Minute), "lapsed")
	enqueue(t, b, queued("before", base.Add(30*time.Second)))
	enqueue(t, b, queued("after", base.Add(90*time.Second)))
	evs := lease(t, b, base.Add(2*time.Minute), 10, time.Minute)
	expectIDs(t, "after the lease lapsed", evs, "before,lapsed,after")
	expectIDs(t, "all leased", lease(t, b, base.Add(2*time.Minute), 10, time.Minute), "")
}

// Once events are leased, some delivered, the next Lease starts its scan past all their due
// entries (and the tombstones of those deleted): a Lease walks what is due, not what was.
func TestLeaseScanStartsPastLeasedAndDeliveredEvents(t *testing.T) {
	b := openTest(t)
	const events = 200
	enqueueMany(t, b, "e", events, base)
	var evs []*dedupe.Event
	for len(evs) < events {
		got := lease(t, b, base, events, time.Hour)
		if len(got) == 0 {
			t.Fatalf("%d of %d leased, then none", len(evs), events)
		}
		evs = append(evs, got...)
	}
	markDelivered(t, b, evs[:events/2])
	expectIDs(t, "nothing else due", lease(t, b, base, events, time.Hour), "")
	floor := b.floors.start("stripe", b.clock())
	b.floors.done("stripe", "")
	prefix, _ := key("stripe", kindDue, "")
	for _, ev := range evs {
		ok, _ := keysFor("stripe", ev.ID)
		if k := string(ok.due(base)[len(prefix):]); k >= floor {
			t.Fatalf("the next scan starts at %q, at or before %s's entry %q", floor, ev.ID, k)
		}
	}
}

// The lease table holds the events handed out and not yet updated, no more.
func TestLeaseTableHoldsOnlyEventsInFlight(t *testing.T) {
	b := openTest(t)
	enqueueMany(t, b, "e", 100, base)
	evs := lease(t, b, base, 100, time.Hour)
	markDelivered(t, b, evs[:60])
	for _, ev := range evs[60:80] {
		ev.NextAttempt = base.Add(time.Hour)
		update(t, b, ev, 0)
	}
	held := func() (int, int) {
		b.leases.mu.Lock()
		defer b.leases.mu.Unlock()
		ns := b.leases.get("stripe")
		return len(ns.byID), ns.ends.Len()
	}
	if entries, ends := held(); entries != 20 || ends != 20 {
		t.Errorf("%d entries, %d lease ends held for 20 events in flight", entries, ends)
	}
	markDelivered(t, b, evs[80:])
	if entries, ends := held(); entries != 0 || ends != 0 {
		t.Errorf("%d entries, %d lease ends held with nothing in flight", entries, ends)
	}
}

// Workers lease and deliver concurrently, as a deliverer's do: a Lease reads a snapshot that may
// predate an Update committing meanwhile, yet no event is handed out twice.
func TestDeliveryCycleHandsOutEachEventOnce(t *testing.T) {
	b := openTest(t)
	const events, workers = 2000, 16
	enqueueMany(t, b, "e", events, time.Now())
	var mu sync.Mutex
	got := map[string]int{}
	var delivered atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for idle := 0; delivered.Load() < events && idle < 1000; {
				evs, err := b.Lease(context.Background(), "stripe", time.Now(), 2, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				if len(evs) == 0 {
					idle++
					continue
				}
				for _, ev := range evs {
					mu.Lock()
					got[ev.ID]++
					mu.Unlock()
					ev.State = dedupe.Delivered
					if err := b.Update(context.Background(), ev, time.Hour); err != nil {
						t.Error(err)
						return
					}
					delivered.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if len(got) != events {
		t.Errorf("%d of %d events handed out", len(got), events)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s handed out %d times", id, n)
		}
	}
}

// A retry (Update to Pending) leaves the event's pending state entry as it is: it lists the
// event by its accept time, which a retry does not change, and never expires.
func TestRetryLeavesTheStateEntry(t *testing.T) {
	b := openTest(t)
	enqueue(t, b, queued("e", base))
	ev := lease(t, b, base, 1, time.Minute)[0]
	ev.Attempts, ev.NextAttempt = 1, base.Add(time.Hour)
	update(t, b, ev, 0)
	ok, _ := keysFor("stripe", "e")
	versions := storedVersions(t, b.db, ok.state(dedupe.Pending, base))
	if versions != 1 {
		t.Errorf("%d versions of the pending state entry, want the one Accept wrote", versions)
	}
	listed, err := b.List(context.Background(), "stripe", dedupe.Pending, dedupe.Cursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	expectIDs(t, "listed pending", listed, "e")
}
