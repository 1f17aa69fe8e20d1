package badgerstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// leaseAsBefore leases up to n events due at now as earlier versions did, on disk: each one's
// record marked leased with its lease count raised and due at now+d, its due entry moved there,
// and an entry in the leased index. It returns their IDs, earliest due first.
func leaseAsBefore(t testing.TB, b *Store, now time.Time, n int, d time.Duration) []string {
	t.Helper()
	prefix, _ := key("stripe", kindDue, "")
	var leased []string
	for len(leased) < n {
		batch := 0
		err := b.db.Update(func(txn *badger.Txn) error {
			scan, err := scanDue(txn, "stripe", prefix, "", sortNanos(now), min(n-len(leased), 500), b.clock(), func(string) bool { return false })
			if err != nil {
				return err
			}
			for _, due := range scan.due {
				rec := *due.rec
				rec.Leased, rec.Leases, rec.NextAttempt = true, rec.Leases+1, now.Add(d)
				if err := txn.Delete(due.keys.due(due.rec.NextAttempt)); err != nil {
					return err
				}
				if err := putRecord(txn, due.keys.record, &rec, time.Time{}); err != nil {
					return err
				}
				if err := txn.Set(due.keys.due(rec.NextAttempt), nil); err != nil {
					return err
				}
				if err := txn.Set(due.keys.leased(), nil); err != nil {
					return err
				}
				leased = append(leased, due.keys.id)
			}
			batch = len(scan.due)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if batch == 0 {
			break
		}
	}
	return leased
}

// Thousands of leases that an earlier version wrote to disk and its process never updated are
// recovered at open in a few commits, not one synced commit each while the first requests wait.
func TestReopenRecoversThousandsOfLeasesInFewCommits(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const orphans = 3000
	enqueueMany(t, b, "orphan", orphans, time.Now())
	if leased := leaseAsBefore(t, b, time.Now(), orphans, time.Hour); len(leased) != orphans {
		t.Fatalf("%d of %d events leased", len(leased), orphans)
	}
	b = reopen(t, b, dir)
	if commits := b.commits.groups.Load(); commits > orphans/100 {
		t.Errorf("recovery took %d commits for %d leases", commits, orphans)
	}
	got := make(map[string]bool)
	for calls := 0; calls < 10; calls++ {
		for _, ev := range lease(t, b, time.Now(), orphans, time.Hour) {
			got[ev.ID] = true
		}
	}
	if len(got) != orphans {
		t.Errorf("%d of %d orphaned events due after reopen", len(got), orphans)
	}
}

// A ledger that an earlier version left with leases on disk opens, recovers and delivers: its
// leased events are due at once, their entries in the leased index go, the lease-expiry entry of
// an event delivered within its lease is dropped without handing the event out, and the holders
// of those leases are fenced off like any other.
func TestLedgerWithLeasesOfAnEarlierVersionRecovers(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for n := range 4 {
		enqueue(t, b, queued(fmt.Sprint("e", n), base))
	}
	if leased := leaseAsBefore(t, b, base, 3, time.Minute); ids(eventsOf(leased)) != "e0,e1,e2" {
		t.Fatalf("leased %v as before", leased)
	}
	expectLeased(t, b, "as an earlier version leased them", "e0,e1,e2")
	delivered, err := b.Get(context.Background(), "stripe", "e0")
	if err != nil {
		t.Fatal(err)
	}
	delivered.State = dedupe.Delivered // by the earlier version's holder, within its lease
	update(t, b, delivered, time.Hour)
	expectLeased(t, b, "once one was delivered", "e1,e2")

	b = reopen(t, b, dir)
	expectLeased(t, b, "after reopen", "")
	now := time.Now()
	recovered := lease(t, b, now, 10, time.Minute)
	expectIDs(t, "due after reopen", recovered, "e1,e2")
	stale := &dedupe.Event{Namespace: "stripe", ID: "e1", State: dedupe.Delivered, LeaseToken: 1}
	if err := b.Update(context.Background(), stale, time.Hour); err == nil {
		t.Error("the earlier version's holder updated an event leased again since")
	}
	markDelivered(t, b, recovered)
	expectIDs(t, "when the delivered one's lease expiry comes due", lease(t, b, base.Add(time.Minute), 10, time.Minute), "e3")
	prefix, _ := key("stripe", kindDue, "")
	var left []string
	err = b.db.View(func(txn *badger.Txn) error {
		it := keyIterator(txn, prefix)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			_, id, err := splitIndexKey(it.Item().Key(), len(prefix))
			if err != nil {
				return err
			}
			left = append(left, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[e3]" {
		t.Errorf("due entries left: %v, want only the leased e3's", left)
	}
}

func eventsOf(ids []string) []*dedupe.Event {
	evs := make([]*dedupe.Event, len(ids))
	for i, id := range ids {
		evs[i] = &dedupe.Event{ID: id}
	}
	return evs
}

// expectLeased checks the IDs in the leased index of namespace stripe.
func expectLeased(t *testing.T, b *Store, step, want string) {
	t.Helper()
	prefix, _ := key("stripe", kindLeased, "")
	var got []*dedupe.Event
	err := b.db.View(func(txn *badger.Txn) error {
		it := keyIterator(txn, prefix)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			got = append(got, &dedupe.Event{ID: string(it.Item().Key()[len(prefix):])})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	expectIDs(t, step, got, want)
}
