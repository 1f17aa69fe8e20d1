package badgerstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// Thousands of leases orphaned by a dead process are recovered at open in a few commits, not
// one synced commit each while the first requests wait.
func TestReopenRecoversThousandsOfLeasesInFewCommits(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const orphans = 3000
	enqueueMany(t, b, "orphan", orphans, time.Now())
	for leased := 0; leased < orphans; {
		evs := lease(t, b, time.Now(), orphans, time.Hour)
		if len(evs) == 0 {
			t.Fatalf("%d of %d events leased, then none", leased, orphans)
		}
		leased += len(evs)
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

// Recovery reads the index of leased events, not every key: the index holds exactly the events
// leased and not yet updated.
func TestLeasedIndexHoldsTheLeasedEvents(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for n := range 4 {
		enqueue(t, b, queued(fmt.Sprint("e", n), base))
	}
	expectLeased(t, b, "before any lease", "")
	evs := lease(t, b, base, 3, time.Minute)
	expectLeased(t, b, "after a lease of three", "e0,e1,e2")
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Hour)
	evs[1].NextAttempt = base.Add(time.Hour)
	update(t, b, evs[1], time.Hour)
	expectLeased(t, b, "after two were updated", "e2")
	expectIDs(t, "leased again when its lease ends", lease(t, b, base.Add(time.Minute), 10, time.Minute), "e3,e2")
	expectLeased(t, b, "after the second lease", "e2,e3")
	b = reopen(t, b, dir)
	expectLeased(t, b, "after reopen", "")
	expectIDs(t, "due after reopen", lease(t, b, time.Now(), 10, time.Minute), "e2,e3")
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
