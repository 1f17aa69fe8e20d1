package ledgerpool

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// recoverLeases assumes that at open no live process holds a lease ("Badger locks its
// directory"), but the pool reopens a failed store inside the same process, whose deliverer's
// workers still hold their leases and are still sending. The reopened store hands those events
// out again at once, well within their leases: two concurrent deliveries of one event.
func TestReopenedStoreKeepsLiveLeases(t *testing.T) {
	dir := t.TempDir()
	pool := newBadgerPool(BadgerTarget(dir), DefaultMinFree)
	defer pool.Destruct()
	ctx := context.Background()
	ev := &dedupe.Event{ID: "evt_leased", Method: "POST", URI: "/hooks", Body: []byte("{}")}
	if _, err := pool.Accept(ctx, dedupe.Claim{Namespace: "r", ID: ev.ID}, ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	const lease = time.Minute
	first, err := pool.Lease(ctx, "r", time.Now(), 10, lease)
	if err != nil || len(first) != 1 {
		t.Fatalf("first lease: %d events, %v", len(first), err)
	}
	// A write of the store fails (as in TestFailedLedgerRefusesThenReopensFromDisk): the pool closes
	// and reopens it while the worker holding the lease is still delivering.
	pool.mu.Lock()
	pool.ledger = &failedStore{store: pool.ledger}
	pool.mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	var again []*dedupe.Event
	for time.Now().Before(deadline) {
		if again, err = pool.Lease(ctx, "r", time.Now(), 10, lease); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the store did not reopen: %v", err)
	}
	if len(again) == 0 { // the Lease that reopened the store had taken its time before the open
		again, err = pool.Lease(ctx, "r", time.Now(), 10, lease)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Fatalf("%s was handed out again %v after it was leased for %v, while its first lease still runs",
			again[0].ID, time.Since(first[0].NextAttempt.Add(-lease)).Round(time.Second), lease)
	}
}
