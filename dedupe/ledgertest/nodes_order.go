package ledgertest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// orderNodesChecks are the promises of ordered queues on a store shared by two nodes: a key's
// order is the store's, whichever node accepted, leased or settled its events.
var orderNodesChecks = []nodesCheck{
	{name: "nodes/a key's events accepted concurrently on two nodes are leased one at a time across both, in the order the store committed them, while other keys flow", run: func(t *testing.T, a, b Store) {
		deliverEachKeyInOrder(t, a, b)
	}},
	{name: "nodes/a head whose holder stopped is leased again by the other node once its lease lapses, never its successor first, and the stopped node's late Update is ErrLeaseLost and promotes nothing", run: orderedTakeOver},
	{name: "nodes/a key held by its dead head on one node is held for the other, and a Skip on the other releases it", run: func(t *testing.T, a, b Store) {
		now := clock().Add(time.Minute)
		acceptInOrder(t, a, "k", now, "e1", "e2")
		settleIn(t, a, billing, now, dedupe.Dead, dedupe.Hold)
		held, err := orderer(t, b).HeldKeys(context.Background(), billing, "", 10)
		if err != nil || len(held) != 1 || held[0].Key != "k" || held[0].Head != "e1" {
			t.Fatalf("HeldKeys on b: %+v, %v; want k held by e1", held, err)
		}
		expectIDs(t, "b behind the held head", leaseIn(t, b, billing, now.Add(time.Hour), 10), "")
		if err := orderer(t, b).Skip(context.Background(), billing, "e1", now, time.Hour); err != nil {
			t.Fatalf("Skip on b: %v", err)
		}
		expectIDs(t, "a once b skipped the head", leaseIn(t, a, billing, now.Add(time.Hour), 10), "e2")
	}},
}

// deliverEachKeyInOrder accepts 10 events of each of 20 keys for billing, concurrently on the
// given nodes (one store, or handles on one store), and then leases and settles them in
// concurrent loops on each node, one of three first attempts failing: every key's events must
// be leased one at a time across all of them, each key's in Seq order (a failed head is leased
// again before its successor), until every event is delivered. The first Lease hands out every
// key's head, and only heads.
func deliverEachKeyInOrder(t *testing.T, nodes ...Store) {
	const keys, per, workers = 20, 10, 4
	at := clock().Add(-time.Minute)
	race(keys*per, func(i int) {
		id, key := fmt.Sprintf("e%03d", i), fmt.Sprintf("k%02d", i%keys)
		// AcceptedAt runs against the order the IDs are accepted in, whatever it is.
		ev := eventOf(id, at.Add(-time.Duration(i)*time.Millisecond))
		out, err := nodes[i%len(nodes)].Accept(context.Background(), ordered(id, key, false), ev, dedupeTTL)
		if err != nil || out != dedupe.Claimed {
			t.Errorf("accept %s: %v, %v", id, out, err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	// order is each key's events by Seq, the order the store committed them in.
	order := map[string][]*dedupe.Event{}
	seqs := map[uint64]string{}
	for i := range keys * per {
		ev := getIn(t, nodes[0], billing, fmt.Sprintf("e%03d", i))
		if other, ok := seqs[ev.Seq]; ok || ev.Seq == 0 {
			t.Fatalf("%s has Seq %d, as %q", ev.ID, ev.Seq, other)
		}
		seqs[ev.Seq] = ev.ID
		order[ev.OrderKey] = append(order[ev.OrderKey], ev)
	}
	for _, evs := range order {
		slices.SortFunc(evs, func(x, y *dedupe.Event) int { return cmp.Compare(x.Seq, y.Seq) })
	}

	next := map[string]int{} // key → the place in order of its event to be leased next
	heads := leaseIn(t, nodes[len(nodes)-1], billing, time.Now(), keys*per)
	if len(heads) != keys {
		t.Fatalf("the first Lease handed out %d events, want one per key, %d", len(heads), keys)
	}
	for _, ev := range heads {
		if want := order[ev.OrderKey][0]; ev.ID != want.ID {
			t.Errorf("the first Lease handed out %s of %s, want its head %s", ev.ID, ev.OrderKey, want.ID)
		}
		next[ev.OrderKey] = 1
		ev.State = dedupe.Delivered
		update(t, nodes[len(nodes)-1], ev, time.Hour)
	}

	var (
		mu        sync.Mutex
		out       = map[string]string{} // key → its event out on a lease, not yet settled
		delivered = keys
		leased    int
		wg        sync.WaitGroup
	)
	finished := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return delivered == keys*per || t.Failed()
	}
	deadline := time.Now().Add(20 * time.Second)
	for w := range workers {
		s := nodes[w%len(nodes)]
		wg.Go(func() {
			for !finished() && time.Now().Before(deadline) {
				evs, err := s.Lease(context.Background(), billing, time.Now(), 3, time.Minute)
				if err != nil {
					t.Errorf("Lease: %v", err)
					return
				}
				if len(evs) == 0 {
					time.Sleep(time.Millisecond)
				}
				for _, ev := range evs {
					mu.Lock()
					key := ev.OrderKey
					if o := out[key]; o != "" {
						t.Errorf("%s of %s leased while %s of its key is out", ev.ID, key, o)
					}
					if n := next[key]; n >= per || ev.ID != order[key][n].ID {
						t.Errorf("%s (Seq %d) of %s leased at place %d of its key, want %s", ev.ID, ev.Seq, key, n, order[key][min(n, per-1)].ID)
					}
					out[key] = ev.ID
					leased++
					nth := leased
					mu.Unlock()

					retry := nth%3 == 0 && ev.Attempts == 0
					time.Sleep(time.Duration(nth%3) * 100 * time.Microsecond) // delivering
					if retry {
						ev.State, ev.Attempts, ev.NextAttempt = dedupe.Pending, 1, time.Now()
					} else {
						ev.State, ev.Attempts = dedupe.Delivered, ev.Attempts+1
					}
					mu.Lock()
					out[key] = ""
					if !retry {
						next[key]++
						delivered++
					}
					mu.Unlock()
					if err := s.Update(context.Background(), ev, time.Hour); err != nil {
						t.Errorf("Update(%s, %s): %v", ev.ID, ev.State, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if delivered != keys*per {
		t.Fatalf("delivered %d of %d events; next place per key %v", delivered, keys*per, next)
	}
	expectIDs(t, "once all are delivered", leaseIn(t, nodes[0], billing, time.Now().Add(time.Hour), 10), "")
}

// orderedTakeOver: node a leases key k's head and stops; b, meanwhile, gets another key's event
// but nothing of k; once a's lease lapses b leases the same head again, not its successor; a's late
// Updates are refused and promote nothing; b's delivery of the head makes the successors due, in order.
func orderedTakeOver(t *testing.T, a, b Store) {
	now := clock().Add(time.Hour)
	const d = 30 * time.Second
	acceptInOrder(t, a, "k", now, "e1", "e2")
	acceptInOrder(t, b, "k", now, "e3")
	died := leaseFor(t, a, now, d)
	if len(died) != 1 || died[0].ID != "e1" {
		t.Fatalf("a leased [%s], want the head e1", ids(died))
	}
	acceptInOrder(t, b, "j", now, "j1")
	within := leaseFor(t, b, now.Add(d-time.Millisecond), time.Minute)
	expectIDs(t, "b within a's lease", within, "j1")
	for _, ev := range within {
		ev.State = dedupe.Delivered
		update(t, b, ev, time.Hour)
	}
	took := leaseFor(t, b, now.Add(d), time.Minute)
	expectIDs(t, "b once a's lease lapsed", took, "e1")
	if len(took) != 1 {
		t.FailNow()
	}
	if took[0].LeaseToken == died[0].LeaseToken {
		t.Errorf("b's lease has a's token %d", died[0].LeaseToken)
	}
	for _, late := range []dedupe.State{dedupe.Delivered, dedupe.Superseded, dedupe.Dead} {
		ev := *died[0]
		ev.State, ev.OnDead, ev.Attempts = late, dedupe.Skip, 1
		expectErr(t, "a's late Update("+string(late)+")", a.Update(context.Background(), &ev, time.Hour), dedupe.ErrLeaseLost)
	}
	for _, s := range []Store{a, b} {
		expectIDs(t, "after a's late Updates", leaseFor(t, s, now.Add(d), time.Minute), "")
	}
	if got := getIn(t, a, billing, "e1"); got.State != dedupe.Pending {
		t.Errorf("the head on a after its late Updates: %s, want pending", got.State)
	}
	took[0].State = dedupe.Delivered
	update(t, b, took[0], time.Hour)
	for i, want := range []string{"e2", "e3"} {
		s := pick(i, a, b)
		got := leaseFor(t, s, now.Add(d), time.Minute)
		expectIDs(t, "once "+[]string{"e1", "e2"}[i]+" is delivered", got, want)
		for _, ev := range got {
			ev.State = dedupe.Delivered
			update(t, s, ev, time.Hour)
		}
	}
}

// leaseFor leases up to 10 events of billing due at now for d.
func leaseFor(t *testing.T, s Store, now time.Time, d time.Duration) []*dedupe.Event {
	t.Helper()
	evs, err := s.Lease(context.Background(), billing, now, 10, d)
	if err != nil {
		t.Fatalf("Lease(%v, %v): %v", now, d, err)
	}
	return evs
}
