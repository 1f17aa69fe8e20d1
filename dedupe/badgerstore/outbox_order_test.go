package badgerstore

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

var r35Billing = dedupe.QueueNamespace("stripe", "billing")

func r35Claim(id, key string) dedupe.Claim {
	return dedupe.Claim{Namespace: "stripe", ID: id, Destinations: []dedupe.Destination{{Name: "billing", OrderKey: key}}}
}

func r35Accept(t *testing.T, b *Store, key string, at time.Time, ids ...string) {
	t.Helper()
	for _, id := range ids {
		expect(t, "accept "+id, accept(t, b, r35Claim(id, key), queued(id, at)), dedupe.Claimed)
	}
}

func r35Lease(t *testing.T, b *Store, now time.Time, n int) []*dedupe.Event {
	t.Helper()
	evs, err := b.Lease(context.Background(), r35Billing, now, n, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// An Update of a waiting event (never leased: token 0 matches its stored 0, so the lease table
// lets it through) makes it due while its key's head is out: two events of one key are out at once.
func TestUpdateOfAWaitingEventPutsTwoOfAKeyOut(t *testing.T) {
	b := openTest(t)
	now := time.Now()
	r35Accept(t, b, "k", now, "e1", "e2")
	head := r35Lease(t, b, time.Now(), 10)
	expectIDs(t, "head", head, "e1")
	waiting := &dedupe.Event{Namespace: r35Billing, ID: "e2", State: dedupe.Pending, Attempts: 1}
	if err := b.Update(context.Background(), waiting, time.Hour); err == nil {
		// Accepted: then it must still wait behind e1.
		if got := r35Lease(t, b, time.Now(), 10); len(got) != 0 {
			t.Fatalf("with e1 leased, Lease handed out %s of the same key", ids(got))
		}
	}
}

// Badger's DoneAndQueue ignores Destination.OrderKey: both events of the key are due at once
// (Redis orders them: TestOrderedDoneAndQueueQueuesInOrder).
func TestDoneAndQueueQueuesInOrder(t *testing.T) {
	b := openTest(t)
	now := time.Now()
	for _, id := range []string{"e1", "e2"} {
		c := r35Claim(id, "k")
		c.Lease = time.Minute
		expect(t, "claim "+id, claim(t, b, c), dedupe.Claimed)
		if err := b.DoneAndQueue(context.Background(), c, queued(id, now), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	got := r35Lease(t, b, time.Now(), 10)
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
	r35Accept(t, b, "k", now, "e1", "e2", "e3")
	if got := b.Pending(r35Billing); got != 3 {
		t.Fatalf("pending before reopen %d, want 3", got)
	}
	head := r35Lease(t, b, time.Now(), 10)
	expectIDs(t, "head", head, "e1")
	b = reopen(t, b, dir)
	t.Cleanup(func() { b.Close() })
	if got := b.Pending(r35Billing); got != 3 {
		t.Fatalf("pending after reopen %d, want 3", got)
	}
	byNS, err := b.PendingByNamespace(context.Background())
	if err != nil || byNS[r35Billing] != 3 {
		t.Fatalf("PendingByNamespace %v %v, want 3", byNS, err)
	}
	c := r35Claim("e4", "k")
	c.Destinations[0].MaxPending = 3
	expect(t, "accept over MaxPending", accept(t, b, c, queued("e4", now)), dedupe.Full)
	// the head recovered, the rest waiting, in order
	for _, want := range []string{"e1", "e2", "e3"} {
		got := r35Lease(t, b, time.Now(), 10)
		if len(got) != 1 || got[0].ID != want {
			t.Fatalf("leased %s, want %s", ids(got), want)
		}
		got[0].State = dedupe.Delivered
		update(t, b, got[0], time.Hour)
	}
	if got := b.Pending(r35Billing); got != 0 {
		t.Fatalf("pending at the end %d, want 0", got)
	}
}

// A dead head held, replayed, goes first; a skipped dead letter replayed while the key is busy goes
// to its tail, and while the key is empty is due at once.
func TestReplaySkipOrder(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	now := time.Now()
	r35Accept(t, b, "k", now, "e1", "e2", "e3")
	ev := r35Lease(t, b, time.Now(), 10)[0]
	ev.State, ev.OnDead = dedupe.Dead, dedupe.Hold
	update(t, b, ev, time.Hour)
	if got := r35Lease(t, b, time.Now(), 10); len(got) != 0 {
		t.Fatalf("held key leased %s", ids(got))
	}
	if err := b.Skip(ctx, r35Billing, "e1", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := b.Replay(ctx, r35Billing, "e1", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"e2", "e3", "e1"} {
		got := r35Lease(t, b, time.Now(), 10)
		if len(got) != 1 || got[0].ID != want {
			t.Fatalf("leased %s, want %s", ids(got), want)
		}
		got[0].State = dedupe.Delivered
		update(t, b, got[0], time.Hour)
	}
}

// A final Update of a waiting event (token 0) runs leaveKey as if it were the head: it promotes
// the event behind it while the real head is still out.
func TestFinalUpdateOfAWaitingEventPromotesPastTheHead(t *testing.T) {
	b := openTest(t)
	r35Accept(t, b, "k", time.Now(), "e1", "e2", "e3")
	expectIDs(t, "head", r35Lease(t, b, time.Now(), 10), "e1")
	waiting := &dedupe.Event{Namespace: r35Billing, ID: "e2", State: dedupe.Delivered}
	if err := b.Update(context.Background(), waiting, time.Hour); err == nil {
		if got := r35Lease(t, b, time.Now(), 10); len(got) != 0 {
			t.Fatalf("with e1 leased, Lease handed out %s of the same key", ids(got))
		}
	}
}
