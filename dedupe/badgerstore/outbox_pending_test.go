package badgerstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// expectBacklog checks the kept count against a scan of the ledger.
func expectBacklog(t *testing.T, step string, b *Store, want int) {
	t.Helper()
	scanned, err := b.PendingByNamespace(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Pending("stripe"); got != want || scanned["stripe"] != want {
		t.Fatalf("%s: backlog %d, scanned %d, want %d", step, got, scanned["stripe"], want)
	}
}

func TestBacklogFollowsEveryState(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for i := range 5 {
		accept(t, b, dedupe.Claim{Namespace: "stripe", ID: fmt.Sprintf("e%d", i)}, queued(fmt.Sprintf("e%d", i), base))
	}
	expectBacklog(t, "5 accepted", b, 5)
	expect(t, "duplicate", accept(t, b, dedupe.Claim{Namespace: "stripe", ID: "e0"}, queued("e0", base)), dedupe.Duplicate)
	expectBacklog(t, "after a duplicate", b, 5)

	evs := lease(t, b, base, 4, time.Minute)
	expectIDs(t, "leased", evs, "e0,e1,e2,e3")
	expectBacklog(t, "leased events are undelivered", b, 5)
	final := []dedupe.State{dedupe.Delivered, dedupe.Dead, dedupe.Superseded}
	for i, state := range final {
		evs[i].State = state
		update(t, b, evs[i], time.Hour)
	}
	evs[3].State, evs[3].NextAttempt = dedupe.Pending, base.Add(time.Hour)
	update(t, b, evs[3], 0)
	expectBacklog(t, "delivered, dead, superseded, rescheduled", b, 2)
	evs[0].State = dedupe.Dead
	if err := b.Update(context.Background(), evs[0], time.Hour); err == nil {
		t.Fatal("a late report over a delivered event was stored")
	}
	expectBacklog(t, "after a refused late report", b, 2)

	if err := b.Replay(context.Background(), "stripe", "e1", time.Now()); err != nil {
		t.Fatal(err)
	}
	expectBacklog(t, "replayed", b, 3)
	b = reopen(t, b, dir)
	expectBacklog(t, "reopened", b, 3)
	accept(t, b, dedupe.Claim{Namespace: "stripe", ID: "e5"}, queued("e5", base))
	expectBacklog(t, "accepted after reopening", b, 4)
}

// TestBacklogBoundIsExact queues accepts past the bound behind a held group commit, mixed with
// requests that fail (so the group is applied again without them): exactly the room left is
// accepted.
func TestBacklogBoundIsExact(t *testing.T) {
	b := openTest(t)
	const bound, before, racing = 10, 4, 30
	bounded := func(id string) dedupe.Claim { return dedupe.Claim{Namespace: "stripe", ID: id, MaxPending: bound} }
	for i := range before {
		expect(t, "room", accept(t, b, bounded(fmt.Sprintf("old%d", i)), queued(fmt.Sprintf("old%d", i), base)), dedupe.Claimed)
	}
	evs := lease(t, b, base, 1, time.Minute)
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Hour)
	expect(t, "room again", accept(t, b, bounded("old4"), queued("old4", base)), dedupe.Claimed)

	release, held := hold(t, b)
	outcomes := make(chan dedupe.Outcome, racing)
	var wg sync.WaitGroup
	for i := range racing {
		wg.Add(2)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("new%d", i)
			out, err := b.Accept(context.Background(), bounded(id), queued(id, base), time.Hour)
			if err != nil {
				t.Error(err)
			}
			outcomes <- out
		}()
		go func() { // fails in the group: the delivered event is final
			defer wg.Done()
			if b.Update(context.Background(), evs[0], time.Hour) == nil {
				t.Error("a final event was updated")
			}
		}()
	}
	waitQueued(t, b, 2*racing)
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(outcomes)
	counts := map[dedupe.Outcome]int{}
	for out := range outcomes {
		counts[out]++
	}
	if counts[dedupe.Claimed] != bound-before || counts[dedupe.Full] != racing-(bound-before) {
		t.Fatalf("%d racing accepts with room for %d: %v", racing, bound-before, counts)
	}
	expectBacklog(t, "at the bound", b, bound)

	expect(t, "full", accept(t, b, bounded("late"), queued("late", base)), dedupe.Full)
	expect(t, "a duplicate while full", accept(t, b, bounded("new0"), queued("new0", base)), dedupe.Duplicate)
	evs = lease(t, b, base, 1, time.Minute)
	evs[0].State = dedupe.Dead
	update(t, b, evs[0], time.Hour)
	expect(t, "room after a dead letter", accept(t, b, bounded("late"), queued("late", base)), dedupe.Claimed)
	expectBacklog(t, "at the bound again", b, bound)
}
