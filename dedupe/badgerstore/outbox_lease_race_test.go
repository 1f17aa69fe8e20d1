package badgerstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// While requests keep accepting events and a deliverer leases them as its slots free up, a Lease
// that hands out fewer events than asked leaves none behind that was accepted before it began:
// every such event is leased, by this Lease or an earlier one. One left behind waits for the
// next full scan (outbox_floor.go) or forever, which the gateway sees as a stalled delivery.
// The clock ticks a microsecond per reading, so due times are distinct and no lease lapses. The
// test stops at the first Lease that leaves events behind.
func TestLeaseLeavesNoAcceptedEventBehindUnderConcurrentAccepts(t *testing.T) {
	const events, accepters, slots = 3000, 64, 16
	b := openTest(t)
	var tick atomic.Int64
	b.clock = func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Microsecond) }
	ctx := context.Background()

	var mu sync.Mutex
	acceptedAt := map[string]int{} // ID -> order in which its Accept returned
	var next atomic.Int64
	var wg sync.WaitGroup
	for range accepters {
		wg.Go(func() {
			for i := next.Add(1); i <= events; i = next.Add(1) {
				ev := queued(fmt.Sprintf("ev-%05d", i), time.Time{})
				if _, err := b.Accept(ctx, dedupe.Claim{Namespace: ev.Namespace}, ev, time.Hour); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acceptedAt[ev.ID] = len(acceptedAt)
				mu.Unlock()
			}
		})
	}

	free := make(chan struct{}, slots)
	for range slots {
		free <- struct{}{}
	}
	var workers sync.WaitGroup
	delivered, leftBehind, belowFloor := 0, 0, 0
	for delivered < events && leftBehind == 0 && !t.Failed() {
		n := 0
		for n == 0 || len(free) > 0 {
			<-free
			n++
		}
		mu.Lock()
		before := len(acceptedAt)
		mu.Unlock()
		evs, err := b.Lease(ctx, "stripe", b.clock(), n, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for range n - len(evs) {
			free <- struct{}{}
		}
		for _, ev := range evs {
			workers.Go(func() {
				defer func() { free <- struct{}{} }()
				ev.State, ev.Attempts, ev.LastStatus = dedupe.Delivered, 1, 200
				if err := b.Update(ctx, ev, time.Hour); err != nil {
					t.Error(err)
				}
			})
		}
		delivered += len(evs)
		if len(evs) < n {
			left, below := unleasedPending(t, b, acceptedAt, &mu, before)
			leftBehind += left
			belowFloor += below
		}
	}
	wg.Wait()
	workers.Wait()
	if leftBehind > 0 {
		t.Errorf("Leases that came back short left %d accepted events behind (%d of them below the floor)", leftBehind, belowFloor)
	}
}

// unleasedPending counts the events whose Accept returned among the first before that are still
// Pending and not in the lease table, and how many of those have a due entry below the floor.
// The table is read first: an event leaves it only once its Update committed, and this test's
// Updates are final.
func unleasedPending(t *testing.T, b *Store, acceptedAt map[string]int, mu *sync.Mutex, before int) (left, below int) {
	t.Helper()
	mu.Lock()
	var ids []string
	for id, at := range acceptedAt {
		if at < before && !b.leases.held("stripe", id) {
			ids = append(ids, id)
		}
	}
	mu.Unlock()
	b.floors.mu.Lock()
	floor := b.floors.get("stripe").at
	b.floors.mu.Unlock()
	prefix, _ := key("stripe", kindDue, "")
	err := b.db.View(func(txn *badger.Txn) error {
		for _, id := range ids {
			ok, err := keysFor("stripe", id)
			if err != nil {
				return err
			}
			rec, live, err := getRecord(txn, ok.record, base)
			if err != nil {
				return err
			}
			if !live || rec.State != dedupe.Pending {
				continue
			}
			left++
			due := string(ok.due(rec.NextAttempt)[len(prefix):])
			if due < floor {
				below++
			}
			t.Logf("%s due %v left behind (floor %x, entry %x)", id, rec.NextAttempt, floor, due)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return left, below
}
