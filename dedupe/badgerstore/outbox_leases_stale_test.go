package badgerstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// failedFinalUpdate leases the event e, then reports it in state with a commit that Badger
// applies but that fails (as a failed WAL sync does), and reopens the store: the write is there,
// and so is the lease the Update did not end.
func failedFinalUpdate(t *testing.T, state dedupe.State, keep time.Duration) (*Store, *dedupe.Event, *time.Time) {
	t.Helper()
	b, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := base
	b.clock = func() time.Time { return clock }
	enqueue(t, b, queued("e", base))
	evs := lease(t, b, base, 1, 10*time.Minute)
	expectIDs(t, "first lease", evs, "e")
	failCommitsAfterApplying(b)
	evs[0].State = state
	if err := b.Update(context.Background(), evs[0], keep); err == nil {
		t.Fatal("Update whose commit failed: no error")
	}
	b.Close()
	if b, err = Reopen(b); err != nil {
		t.Fatal(err)
	}
	b.clock = func() time.Time { return clock }
	t.Cleanup(func() { b.Close() })
	return b, evs[0], &clock
}

// An event accepted again under the ID of one that was delivered and expired is due at once and
// its own: the lease of the old one, left by a failed commit that still wrote Delivered, neither
// holds it back nor lets the old holder report on it.
func TestEventAcceptedAgainUnderAnExpiredIDIsNotHeldByTheOldLease(t *testing.T) {
	b, old, clock := failedFinalUpdate(t, dedupe.Delivered, time.Minute)
	*clock = base.Add(2 * time.Minute)
	if _, err := b.Get(context.Background(), "stripe", "e"); !errors.Is(err, dedupe.ErrNotFound) {
		t.Fatalf("the delivered event after its keep: %v, want ErrNotFound", err)
	}
	enqueue(t, b, queued("e", *clock))
	old.State = dedupe.Delivered
	if err := b.Update(context.Background(), old, time.Hour); !errors.Is(err, dedupe.ErrLeaseLost) {
		t.Errorf("the old holder's report on the new event: %v, want ErrLeaseLost", err)
	}
	evs := lease(t, b, *clock, 1, time.Minute)
	expectIDs(t, "the new event", evs, "e")
	if len(evs) == 1 {
		evs[0].State = dedupe.Delivered
		update(t, b, evs[0], time.Hour)
	}
}

// A dead event replayed is due at once: the lease left by a failed commit that still wrote Dead
// does not hold it back.
func TestReplayedEventIsNotHeldByALeaseLeftByAFailedCommit(t *testing.T) {
	b, _, clock := failedFinalUpdate(t, dedupe.Dead, time.Hour)
	*clock = base.Add(2 * time.Minute)
	if err := b.Replay(context.Background(), "stripe", "e", *clock); err != nil {
		t.Fatal(err)
	}
	expectIDs(t, "the replayed event", lease(t, b, *clock, 1, time.Minute), "e")
}
