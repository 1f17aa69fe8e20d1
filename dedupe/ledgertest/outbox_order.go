package ledgertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// ordered is a claim of id queued for billing, ordered by key (and for analytics, unordered,
// when both).
func ordered(id, key string, both bool) dedupe.Claim {
	c := claimOf(id)
	c.Destinations = []dedupe.Destination{{Name: "billing", OrderKey: key}}
	if both {
		c.Destinations = append(c.Destinations, dedupe.Destination{Name: "analytics"})
	}
	return c
}

// acceptInOrder accepts ids for billing under key, each accepted at at minus its place, so that
// their AcceptedAt runs against the order Accept commits them in.
func acceptInOrder(t *testing.T, s Store, key string, at time.Time, ids ...string) {
	t.Helper()
	for i, id := range ids {
		ev := eventOf(id, at.Add(-time.Duration(i)*time.Second))
		expect(t, "accept "+id, accept(t, s, ordered(id, key, false), ev), dedupe.Claimed)
	}
}

// settleIn leases the single due event of queue and updates it to state.
func settleIn(t *testing.T, s Store, queue string, now time.Time, state dedupe.State, onDead dedupe.OnDead) *dedupe.Event {
	t.Helper()
	ev := leaseOneIn(t, s, queue, now)
	ev.State, ev.OnDead = state, onDead
	if state == dedupe.Pending {
		ev.NextAttempt = now.Add(time.Hour)
	}
	update(t, s, ev, time.Hour)
	return ev
}

func orderer(t *testing.T, s Store) dedupe.Orderer {
	t.Helper()
	o, ok := s.(dedupe.Orderer)
	if !ok {
		t.Fatalf("%T is no dedupe.Orderer", s)
	}
	return o
}

// orderChecks are the promises of ordered queues (dedupe.Orderer).
var orderChecks = []check{
	{name: "order/a key's events are leased one at a time, in the order Accept committed them, whatever their AcceptedAt", run: func(t *testing.T, s Store) {
		now := clock().Add(time.Minute)
		acceptInOrder(t, s, "cus_1", now, "e1", "e2", "e3")
		for _, want := range []string{"e1", "e2", "e3"} {
			got := settleIn(t, s, billing, now, dedupe.Delivered, dedupe.Hold)
			if got.ID != want || got.OrderKey != "cus_1" {
				t.Fatalf("leased %s (key %q), want %s of cus_1", got.ID, got.OrderKey, want)
			}
		}
		expectIDs(t, "once all are delivered", leaseIn(t, s, billing, now, 10), "")
	}},
	{name: "order/a key's events accepted and leased concurrently are leased one at a time, in the order Accept committed them, while other keys flow", run: func(t *testing.T, s Store) {
		deliverEachKeyInOrder(t, s)
	}},
	{name: "order/Seq increases with every accept, one number across the event's destinations", run: func(t *testing.T, s Store) {
		now := clock()
		expect(t, "accept a", accept(t, s, ordered("a", "k", true), eventOf("a", now)), dedupe.Claimed)
		expect(t, "accept b", accept(t, s, ordered("b", "j", true), eventOf("b", now)), dedupe.Claimed)
		a, b := getIn(t, s, billing, "a"), getIn(t, s, analytics, "a")
		if a.Seq == 0 || a.Seq != b.Seq && b.Seq != 0 {
			t.Errorf("a's Seq %d in billing, %d in analytics; want one number", a.Seq, b.Seq)
		}
		if next := getIn(t, s, billing, "b"); next.Seq <= a.Seq {
			t.Errorf("b's Seq %d is not after a's %d", next.Seq, a.Seq)
		}
	}},
	{name: "order/a retrying head holds back only its key: other keys and unordered destinations flow", run: func(t *testing.T, s Store) {
		now := clock().Add(time.Minute)
		expect(t, "accept k1", accept(t, s, ordered("k1", "k", true), eventOf("k1", now)), dedupe.Claimed)
		expect(t, "accept k2", accept(t, s, ordered("k2", "k", true), eventOf("k2", now)), dedupe.Claimed)
		expect(t, "accept j1", accept(t, s, ordered("j1", "j", false), eventOf("j1", now)), dedupe.Claimed)
		evs := leaseIn(t, s, billing, now, 10)
		expectIDs(t, "the heads", evs, "j1,k1")
		for _, ev := range evs {
			if ev.ID == "k1" {
				ev.State, ev.NextAttempt = dedupe.Pending, now.Add(time.Hour)
				update(t, s, ev, 0)
			} else {
				ev.State = dedupe.Delivered
				update(t, s, ev, time.Hour)
			}
		}
		expectIDs(t, "while k1 retries", leaseIn(t, s, billing, now.Add(time.Minute), 10), "")
		expectIDs(t, "the unordered destination", leaseIn(t, s, analytics, now, 10), "k1,k2")
		expectIDs(t, "k1's retry, then k2 behind it", leaseIn(t, s, billing, now.Add(2*time.Hour), 10), "k1")
	}},
	{name: "order/a head whose lease lapsed is leased again, and its successor not meanwhile", run: func(t *testing.T, s Store) {
		now := clock().Add(time.Minute)
		acceptInOrder(t, s, "k", now, "e1", "e2")
		died := leaseOneIn(t, s, billing, now)
		took := leaseOneIn(t, s, billing, now.Add(2*time.Minute))
		if took.ID != "e1" {
			t.Fatalf("after the lapse %s was leased, want the head e1", took.ID)
		}
		died.State = dedupe.Delivered
		expectErr(t, "the lapsed holder's Update", s.Update(context.Background(), died, time.Hour), dedupe.ErrLeaseLost)
		expectIDs(t, "after the refused Update", leaseIn(t, s, billing, now.Add(2*time.Minute), 10), "")
		took.State = dedupe.Delivered
		update(t, s, took, time.Hour)
		expectIDs(t, "once the head is delivered", leaseIn(t, s, billing, now.Add(2*time.Minute), 10), "e2")
	}},
	{name: "order/a superseded head, and a dead one under Skip, release their key at once", run: func(t *testing.T, s Store) {
		now := clock().Add(time.Minute)
		acceptInOrder(t, s, "k", now, "e1", "e2", "e3")
		settleIn(t, s, billing, now, dedupe.Superseded, dedupe.Hold)
		settleIn(t, s, billing, now, dedupe.Dead, dedupe.Skip)
		expectIDs(t, "after both", leaseIn(t, s, billing, now, 10), "e3")
		if n, err := orderer(t, s).CountHeld(context.Background(), billing); err != nil || n != 0 {
			t.Errorf("CountHeld: %d, %v; want none", n, err)
		}
	}},
	{name: "order/a dead head under Hold holds its key until it is replayed, and then goes first", run: func(t *testing.T, s Store) {
		now := clock().Add(time.Minute)
		acceptInOrder(t, s, "k", now, "e1", "e2")
		settleIn(t, s, billing, now, dedupe.Dead, dedupe.Hold)
		expectIDs(t, "behind the held head", leaseIn(t, s, billing, now.Add(time.Hour), 10), "")
		o := orderer(t, s)
		held, err := o.HeldKeys(context.Background(), billing, "", 10)
		if err != nil || len(held) != 1 || held[0].Key != "k" || held[0].Head != "e1" || held[0].Waiting != 1 {
			t.Fatalf("HeldKeys: %+v, %v; want k held by e1 with one waiting", held, err)
		}
		if got := getIn(t, s, billing, "e1"); got.State != dedupe.Dead || !got.Holds {
			t.Errorf("the head: %s, holds %v", got.State, got.Holds)
		}
		replayIn(t, s, billing, "e1")
		settleIn(t, s, billing, time.Now(), dedupe.Delivered, dedupe.Hold)
		expectIDs(t, "after the replayed head", leaseIn(t, s, billing, time.Now(), 10), "e2")
		if n, _ := o.CountHeld(context.Background(), billing); n != 0 {
			t.Errorf("CountHeld after the replay: %d", n)
		}
	}},
	{name: "order/Skip releases a held key and keeps the dead letter; it refuses what holds no key", run: func(t *testing.T, s Store) {
		now := clock().Add(time.Minute)
		acceptInOrder(t, s, "k", now, "e1", "e2")
		settleIn(t, s, billing, now, dedupe.Dead, dedupe.Hold)
		o := orderer(t, s)
		if err := o.Skip(context.Background(), billing, "e1", now, time.Hour); err != nil {
			t.Fatalf("Skip: %v", err)
		}
		expectIDs(t, "after the skip", leaseIn(t, s, billing, now, 10), "e2")
		if got := getIn(t, s, billing, "e1"); got.State != dedupe.Dead || got.Holds {
			t.Errorf("the skipped head: %s, holds %v; want a dead letter holding nothing", got.State, got.Holds)
		}
		expectErr(t, "Skip again", o.Skip(context.Background(), billing, "e1", now, time.Hour), dedupe.ErrNotHeld)
		expectErr(t, "Skip of nothing", o.Skip(context.Background(), billing, "nope", now, time.Hour), dedupe.ErrNotFound)
	}},
	{name: "order/a key's waiting events count against MaxPending", run: func(t *testing.T, s Store) {
		now := clock()
		for i, want := range []dedupe.Outcome{dedupe.Claimed, dedupe.Claimed, dedupe.Full} {
			c := ordered(fmt.Sprint("e", i), "k", false)
			c.Destinations[0].MaxPending = 2
			expect(t, c.ID, accept(t, s, c, eventOf(c.ID, now)), want)
		}
	}},
	{name: "order/each destination keeps its own order: a head retrying in one queue holds nothing in another", run: func(t *testing.T, s Store) {
		now := clock().Add(time.Minute)
		for _, id := range []string{"e1", "e2"} {
			c := claimOf(id)
			c.Destinations = []dedupe.Destination{{Name: "billing", OrderKey: "k"}, {Name: "analytics", OrderKey: "k"}}
			expect(t, "accept "+id, accept(t, s, c, eventOf(id, now)), dedupe.Claimed)
		}
		settleIn(t, s, billing, now, dedupe.Pending, dedupe.Hold)
		settleIn(t, s, analytics, now, dedupe.Delivered, dedupe.Hold)
		expectIDs(t, "analytics goes on", leaseIn(t, s, analytics, now, 10), "e2")
		expectIDs(t, "billing waits on its head", leaseIn(t, s, billing, now.Add(time.Minute), 10), "")
	}},
}
