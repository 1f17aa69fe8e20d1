package ledgertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// nodesChecks are the promises that hold across gateway nodes sharing one store, each with its
// own handle on it: what one node records, the other sees, and no event is worked on by two.
var nodesChecks = []nodesCheck{
	{name: "nodes/of concurrent claims of one ID on two nodes exactly one is Claimed", run: func(t *testing.T, a, b Store) {
		var got tally
		race(50, func(i int) {
			out, err := pick(i, a, b).Claim(context.Background(), claimOf("hot"))
			if err != nil {
				t.Error(err)
				return
			}
			got.add(out)
		})
		got.expect(t, "50 claims on two nodes", map[dedupe.Outcome]int{dedupe.Claimed: 1, dedupe.InFlight: 49})
	}},
	{name: "nodes/what one node claims, releases or marks done, the other sees", run: func(t *testing.T, a, b Store) {
		expect(t, "claim on a", claim(t, a, claimOf("r")), dedupe.Claimed)
		expect(t, "claim on b while a holds it", claim(t, b, claimOf("r")), dedupe.InFlight)
		release(t, a, claimOf("r"))
		expect(t, "claim on b after a released it", claim(t, b, claimOf("r")), dedupe.Claimed)

		c := versioned("d", "cus_1", 5)
		c.Digest = "body-D"
		expect(t, "claim on a", claim(t, a, c), dedupe.Claimed)
		done(t, a, c, dedupeTTL)
		expect(t, "the done ID on b", claim(t, b, claimOf("d")), dedupe.Duplicate)
		expect(t, "its bytes under a fresh ID on b", claim(t, b, signed("d2", "body-D")), dedupe.Duplicate)
		expect(t, "an older version on b", claim(t, b, versioned("v4", "cus_1", 4)), dedupe.Stale)
		oc, ev := versionedEvent("v3", "cus_1", 3, clock())
		expect(t, "an older version accepted on b", accept(t, b, oc, ev), dedupe.Stale)
	}},
	{name: "nodes/a claim of a node that died is taken over once its lease lapses", run: func(t *testing.T, a, b Store) {
		leaseHolds(t, a, b)
	}},
	{name: "nodes/of concurrent accepts of one ID on two nodes exactly one is Claimed", run: func(t *testing.T, a, b Store) {
		var got tally
		race(50, func(i int) {
			out, err := pick(i, a, b).Accept(context.Background(), claimOf("hot"), eventOf("hot", clock()), dedupeTTL)
			if err != nil {
				t.Error(err)
				return
			}
			got.add(out)
		})
		got.expect(t, "50 accepts on two nodes", map[dedupe.Outcome]int{dedupe.Claimed: 1, dedupe.Duplicate: 49})
		expectIDs(t, "queued", lease(t, a, time.Now(), 10, time.Minute), "hot")
	}},
	{name: "nodes/MaxPending bounds the backlog of both nodes together", run: func(t *testing.T, a, b Store) {
		const bound, racing = 5, 20
		var got tally
		race(racing, func(i int) {
			c := claimOf(fmt.Sprint("e", i))
			c.MaxPending = bound
			out, err := pick(i, a, b).Accept(context.Background(), c, eventOf(c.ID, clock()), dedupeTTL)
			if err != nil {
				t.Error(err)
				return
			}
			got.add(out)
		})
		got.expect(t, "accepts on two nodes", map[dedupe.Outcome]int{dedupe.Claimed: bound, dedupe.Full: racing - bound})
	}},
	{name: "nodes/Leases on two nodes hand each event to one of them", run: func(t *testing.T, a, b Store) {
		at := clock()
		for i := range 200 {
			enqueue(t, pick(i, a, b), eventOf(fmt.Sprintf("evt_%03d", i), at))
		}
		leaseEachOnce(t, 200, time.Now(), []Store{a, b, a, b, a, b, a, b})
	}},
	{name: "nodes/a lease held by a node that stopped is taken over after it lapses, and the stopped node's late Update is ErrLeaseLost", run: takeOver},
	{name: "nodes/one entity's events are never leased to two nodes at once", run: entityOnOneNode},
	{name: "nodes/a dead letter replayed on one node is delivered by the other", run: func(t *testing.T, a, b Store) {
		enqueue(t, a, eventOf("e", clock()))
		dead := leaseOne(t, a, time.Now(), time.Minute)
		dead.State, dead.Attempts, dead.LastStatus = dedupe.Dead, 8, 500
		update(t, a, dead, time.Hour)
		expectIDs(t, "dead letters listed on b", list(t, b, dedupe.Dead, dedupe.Cursor{}, 10), "e")
		if err := b.Replay(context.Background(), ns, "e", time.Now()); err != nil {
			t.Fatalf("Replay on b: %v", err)
		}
		ev := leaseOne(t, a, time.Now(), time.Minute)
		if ev.ID != "e" || ev.Attempts != 0 || len(ev.Body) == 0 {
			t.Fatalf("leased on a after the replay: %+v", ev)
		}
		ev.State, ev.Attempts = dedupe.Delivered, 1
		update(t, a, ev, time.Hour)
		expectState(t, "on b", b, "e", dedupe.Delivered)
	}},
}

// pick is a for even i and b for odd i.
func pick(i int, a, b Store) Store {
	if i%2 == 0 {
		return a
	}
	return b
}

func takeOver(t *testing.T, a, b Store) {
	now := clock().Add(time.Hour)
	const d = 30 * time.Second
	enqueue(t, a, eventOf("e", now))
	died := leaseOne(t, a, now, d)
	expectIDs(t, "b within a's lease", lease(t, b, now.Add(d-time.Millisecond), 10, time.Minute), "")
	took := leaseOne(t, b, now.Add(d), time.Minute)
	if took.LeaseToken == died.LeaseToken {
		t.Errorf("b's lease has a's token %d", died.LeaseToken)
	}
	took.State, took.Attempts, took.LastStatus = dedupe.Delivered, 1, 200
	update(t, b, took, time.Hour)
	for _, late := range []dedupe.State{dedupe.Delivered, dedupe.Pending, dedupe.Dead} {
		died.State, died.Attempts, died.NextAttempt = late, 1, now.Add(time.Hour)
		expectErr(t, "a's late Update("+string(late)+")", a.Update(context.Background(), died, time.Hour), dedupe.ErrLeaseLost)
	}
	expectState(t, "on a", a, "e", dedupe.Delivered)
}

// entityOnOneNode: the deliverer of one node sends an entity's events one at a time, in version
// order; across nodes, that takes the store keeping an entity's events off the other nodes.
func entityOnOneNode(t *testing.T, a, b Store) {
	at := clock().Add(-time.Minute) // due at once, in this order
	for i, id := range []string{"e1", "e2", "f1"} {
		entity := "cus_" + id[:1]
		c, ev := versionedEvent(id, entity, int64(id[1]-'0'), at.Add(time.Duration(i)*time.Millisecond))
		expect(t, "accept "+id, accept(t, a, c, ev), dedupe.Claimed)
	}
	now := time.Now()
	held := lease(t, a, now, 1, time.Minute)
	expectIDs(t, "a leases the earliest", held, "e1")
	if len(held) != 1 {
		t.FailNow()
	}
	expectIDs(t, "b while a holds e1", lease(t, b, now, 10, time.Minute), "f1")
	held[0].State = dedupe.Delivered
	update(t, a, held[0], time.Hour)
	expectIDs(t, "b once a delivered e1", lease(t, b, time.Now(), 10, time.Minute), "e2")
}
