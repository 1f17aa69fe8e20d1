package badgerstore

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

var orderedQueue = dedupe.QueueNamespace("stripe", "billing")

func orderedClaim(id, key string) dedupe.Claim {
	return dedupe.Claim{Namespace: "stripe", ID: id, Destinations: []dedupe.Destination{{Name: "billing", OrderKey: key}}}
}

func acceptOrdered(t *testing.T, b *Store, key string, at time.Time, ids ...string) {
	t.Helper()
	for _, id := range ids {
		expect(t, "accept "+id, accept(t, b, orderedClaim(id, key), queued(id, at)), dedupe.Claimed)
	}
}

func leaseOrdered(t *testing.T, b *Store, now time.Time, n int) []*dedupe.Event {
	t.Helper()
	evs, err := b.Lease(context.Background(), orderedQueue, now, n, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// An Update of a waiting event (never leased: token 0 matches its stored 0, so the lease table
// lets it through) leaves it waiting behind its key's head: two events of one key are never out.
func TestARetryUpdateOfAWaitingEventKeepsItBehindItsHead(t *testing.T) {
	b := openTest(t)
	now := time.Now()
	acceptOrdered(t, b, "k", now, "e1", "e2")
	head := leaseOrdered(t, b, time.Now(), 10)
	expectIDs(t, "head", head, "e1")
	waiting := &dedupe.Event{Namespace: orderedQueue, ID: "e2", State: dedupe.Pending, Attempts: 1}
	if err := b.Update(context.Background(), waiting, time.Hour); err == nil {
		// Accepted: then it must still wait behind e1.
		if got := leaseOrdered(t, b, time.Now(), 10); len(got) != 0 {
			t.Fatalf("with e1 leased, Lease handed out %s of the same key", ids(got))
		}
	}
}

// DoneAndQueue queues a copy in its key's order, as Accept does: of two events of one key only
// the first is due, and it carries its sequence.
func TestDoneAndQueueQueuesInOrder(t *testing.T) {
	b := openTest(t)
	now := time.Now()
	for _, id := range []string{"e1", "e2"} {
		c := orderedClaim(id, "k")
		c.Lease = time.Minute
		expect(t, "claim "+id, claim(t, b, c), dedupe.Claimed)
		if err := b.DoneAndQueue(context.Background(), c, queued(id, now), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	got := leaseOrdered(t, b, time.Now(), 10)
	if len(got) != 1 || got[0].ID != "e1" || got[0].Seq == 0 {
		t.Fatalf("leased %s (%+v), want e1 alone with a sequence", ids(got), got)
	}
}

// After a reopen the pending counter counts the waiting events too, and MaxPending applies.
func TestPendingCountAfterReopenWithWaitingEvents(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	acceptOrdered(t, b, "k", now, "e1", "e2", "e3")
	if got := b.Pending(orderedQueue); got != 3 {
		t.Fatalf("pending before reopen %d, want 3", got)
	}
	head := leaseOrdered(t, b, time.Now(), 10)
	expectIDs(t, "head", head, "e1")
	b = reopen(t, b, dir)
	t.Cleanup(func() { b.Close() })
	if got := b.Pending(orderedQueue); got != 3 {
		t.Fatalf("pending after reopen %d, want 3", got)
	}
	byNS, err := b.PendingByNamespace(context.Background())
	if err != nil || byNS[orderedQueue] != 3 {
		t.Fatalf("PendingByNamespace %v %v, want 3", byNS, err)
	}
	c := orderedClaim("e4", "k")
	c.Destinations[0].MaxPending = 3
	expect(t, "accept over MaxPending", accept(t, b, c, queued("e4", now)), dedupe.Full)
	// the head recovered, the rest waiting, in order
	for _, want := range []string{"e1", "e2", "e3"} {
		got := leaseOrdered(t, b, time.Now(), 10)
		if len(got) != 1 || got[0].ID != want {
			t.Fatalf("leased %s, want %s", ids(got), want)
		}
		got[0].State = dedupe.Delivered
		update(t, b, got[0], time.Hour)
	}
	if got := b.Pending(orderedQueue); got != 0 {
		t.Fatalf("pending at the end %d, want 0", got)
	}
}

// A dead head held, replayed, goes first; a skipped dead letter replayed while the key is busy goes
// to its tail, and while the key is empty is due at once.
func TestAReplayedHeldHeadGoesFirstAndAReplayedSkippedOneGoesToTheTail(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	now := time.Now()
	acceptOrdered(t, b, "k", now, "e1", "e2", "e3")
	ev := leaseOrdered(t, b, time.Now(), 10)[0]
	ev.State, ev.OnDead = dedupe.Dead, dedupe.Hold
	update(t, b, ev, time.Hour)
	if got := leaseOrdered(t, b, time.Now(), 10); len(got) != 0 {
		t.Fatalf("held key leased %s", ids(got))
	}
	if err := b.Skip(ctx, orderedQueue, "e1", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := b.Replay(ctx, orderedQueue, "e1", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"e2", "e3", "e1"} {
		got := leaseOrdered(t, b, time.Now(), 10)
		if len(got) != 1 || got[0].ID != want {
			t.Fatalf("leased %s, want %s", ids(got), want)
		}
		got[0].State = dedupe.Delivered
		update(t, b, got[0], time.Hour)
	}
}

// A final Update of a waiting event (token 0) takes it out of its key without promoting the
// event behind it: the head is still out, and nothing else of the key is leased meanwhile.
func TestAFinalUpdateOfAWaitingEventPromotesNothingPastTheHead(t *testing.T) {
	b := openTest(t)
	acceptOrdered(t, b, "k", time.Now(), "e1", "e2", "e3")
	expectIDs(t, "head", leaseOrdered(t, b, time.Now(), 10), "e1")
	waiting := &dedupe.Event{Namespace: orderedQueue, ID: "e2", State: dedupe.Delivered}
	if err := b.Update(context.Background(), waiting, time.Hour); err == nil {
		if got := leaseOrdered(t, b, time.Now(), 10); len(got) != 0 {
			t.Fatalf("with e1 leased, Lease handed out %s of the same key", ids(got))
		}
	}
}
