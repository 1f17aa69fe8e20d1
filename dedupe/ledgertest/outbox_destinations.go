package ledgertest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// The destinations the checks queue for: the route's default one and two named ones.
var (
	legacy    = dedupe.QueueNamespace(ns, dedupe.DefaultDestination)
	billing   = dedupe.QueueNamespace(ns, "billing")
	analytics = dedupe.QueueNamespace(ns, "analytics")
	threeWays = []string{legacy, billing, analytics}
)

// fanOut is a claim of id queued for the default destination, billing and analytics, each
// bounded by bound (0: unbounded).
func fanOut(id string, bound int) dedupe.Claim {
	c := claimOf(id)
	for _, name := range []string{dedupe.DefaultDestination, "billing", "analytics"} {
		c.Destinations = append(c.Destinations, dedupe.Destination{Name: name, MaxPending: bound})
	}
	return c
}

// destinationChecks are the promises of an event queued for several destinations
// (dedupe/destination.go): stored once, delivered to each on its own.
var destinationChecks = []check{
	{name: "destinations/an event accepted for three destinations is queued in each, with its request", run: func(t *testing.T, s Store) {
		at := clock().Add(-time.Minute)
		want := eventOf("e", at)
		expect(t, "accept", accept(t, s, fanOut("e", 0), want), dedupe.Claimed)
		for _, q := range threeWays {
			ev := leaseOneIn(t, s, q, time.Now())
			if ev.Namespace != q || ev.ID != "e" || !bytes.Equal(ev.Body, want.Body) || ev.Header.Get("X-Signature") != "t=1,v1=ab" || !ev.AcceptedAt.Equal(at) {
				t.Errorf("leased from %q: %+v; want the event as accepted", q, ev)
			}
		}
		expect(t, "the same ID again", accept(t, s, fanOut("e", 0), eventOf("e", at)), dedupe.Duplicate)
		for _, q := range threeWays {
			expectIDs(t, "after the duplicate, "+q, leaseIn(t, s, q, time.Now(), 10), "")
		}
	}},
	{name: "destinations/a destination at its MaxPending makes the event Full, and nothing is stored for any", run: func(t *testing.T, s Store) {
		at := clock().Add(-time.Minute)
		c := fanOut("a", 0)
		c.Destinations[1].MaxPending = 1 // billing
		expect(t, "first", accept(t, s, c, eventOf("a", at)), dedupe.Claimed)
		c.ID = "b"
		expect(t, "second, billing full", accept(t, s, c, eventOf("b", at)), dedupe.Full)
		for _, q := range threeWays {
			expectIDs(t, "queued in "+q, leaseIn(t, s, q, time.Now(), 10), "a")
		}
		ev := leaseOneIn(t, s, billing, time.Now().Add(time.Hour))
		ev.State = dedupe.Delivered
		update(t, s, ev, time.Hour)
		expect(t, "once billing delivered (the refusal marked nothing done)", accept(t, s, c, eventOf("b", at)), dedupe.Claimed)
	}},
	{name: "destinations/one destination's outcome never changes another's", run: func(t *testing.T, s Store) {
		at := clock().Add(-time.Minute)
		expect(t, "accept", accept(t, s, fanOut("e", 0), eventOf("e", at)), dedupe.Claimed)
		held := map[string]*dedupe.Event{}
		for _, q := range threeWays {
			held[q] = leaseOneIn(t, s, q, time.Now())
		}
		held[legacy].State, held[legacy].Attempts = dedupe.Delivered, 1
		update(t, s, held[legacy], time.Hour)
		held[billing].State, held[billing].Attempts = dedupe.Dead, 8
		update(t, s, held[billing], time.Hour)
		retry := held[analytics]
		retry.State, retry.Attempts, retry.NextAttempt = dedupe.Pending, 1, time.Now().Add(time.Hour)
		update(t, s, retry, 0)

		for q, want := range map[string]dedupe.State{legacy: dedupe.Delivered, billing: dedupe.Dead, analytics: dedupe.Pending} {
			got := getIn(t, s, q, "e")
			if got.State != want {
				t.Errorf("%q: %s, want %s", q, got.State, want)
			}
			if keeps := len(got.Body) > 0; keeps != (want != dedupe.Delivered) {
				t.Errorf("%q (%s): body %q", q, got.State, got.Body)
			}
			if n := len(listIn(t, s, q, want)); n != 1 {
				t.Errorf("%q lists %d %s events, want 1", q, n, want)
			}
		}
		ev := leaseOneIn(t, s, analytics, retry.NextAttempt)
		if ev.Attempts != 1 || !bytes.Equal(ev.Body, eventOf("e", at).Body) {
			t.Errorf("analytics' retry: %+v; want its attempt and the body", ev)
		}
		ev.State = dedupe.Delivered
		update(t, s, ev, time.Hour)
		if got := getIn(t, s, billing, "e"); !bytes.Equal(got.Body, eventOf("e", at).Body) {
			t.Errorf("billing's dead letter lost its body once the others delivered: %q", got.Body)
		}
		replayIn(t, s, billing, "e")
		ev = leaseOneIn(t, s, billing, time.Now())
		if ev.Attempts != 0 || !bytes.Equal(ev.Body, eventOf("e", at).Body) {
			t.Errorf("billing's replay: %+v; want it with its body", ev)
		}
		ev.State = dedupe.Delivered
		update(t, s, ev, time.Hour)
		for _, q := range threeWays {
			if got := getIn(t, s, q, "e"); got.State != dedupe.Delivered || got.Body != nil || got.BodyBytes != len(eventOf("e", at).Body) {
				t.Errorf("%q once all delivered: %s, body %q (%d bytes)", q, got.State, got.Body, got.BodyBytes)
			}
		}
	}},
	{name: "destinations/a dead letter keeps its body while other destinations deliver, and replays in its own queue only", run: func(t *testing.T, s Store) {
		at := clock().Add(-time.Minute)
		expect(t, "accept", accept(t, s, fanOut("e", 0), eventOf("e", at)), dedupe.Claimed)
		dead := leaseOneIn(t, s, analytics, time.Now())
		dead.State = dedupe.Dead
		update(t, s, dead, time.Hour)
		for _, q := range []string{legacy, billing} {
			ev := leaseOneIn(t, s, q, time.Now())
			ev.State = dedupe.Superseded
			update(t, s, ev, time.Hour)
		}
		expectErr(t, "replay where it is not dead", s.Replay(context.Background(), billing, "e", time.Now()), dedupe.ErrNotDead)
		expectErr(t, "replay in a queue it never entered", s.Replay(context.Background(), dedupe.QueueNamespace(ns, "other"), "e", time.Now()), dedupe.ErrNotFound)
		replayIn(t, s, analytics, "e")
		for _, q := range []string{legacy, billing} {
			expectIDs(t, "after the replay, "+q, leaseIn(t, s, q, time.Now(), 10), "")
		}
		if ev := leaseOneIn(t, s, analytics, time.Now()); !bytes.Equal(ev.Body, eventOf("e", at).Body) {
			t.Errorf("replayed without its body: %q", ev.Body)
		}
	}},
	{name: "destinations/an ID still queued for some destinations is a duplicate for others, and their deliveries keep its request", run: func(t *testing.T, s Store) {
		at := clock().Add(-time.Minute)
		first := dedupe.Claim{Namespace: ns, Destinations: []dedupe.Destination{{Name: "billing"}, {Name: "analytics"}}}
		expect(t, "accept for billing and analytics", accept(t, s, first, eventOf("e", at)), dedupe.Claimed)
		dead := leaseOneIn(t, s, billing, time.Now())
		dead.State = dedupe.Dead
		update(t, s, dead, time.Hour)
		delivered := leaseOneIn(t, s, analytics, time.Now())
		delivered.State = dedupe.Delivered
		update(t, s, delivered, time.Hour)
		// Dedupe off stands for the ID coming back past its dedupe window, for other destinations.
		second := eventOf("e", at.Add(time.Second))
		second.Body = []byte(`{"id":"e","second":true}`)
		expect(t, "the ID again, for the default destination", accept(t, s, dedupe.Claim{Namespace: ns}, second), dedupe.Duplicate)
		replayIn(t, s, billing, "e")
		if got := leaseOneIn(t, s, billing, time.Now()); !bytes.Equal(got.Body, eventOf("e", at).Body) {
			t.Errorf("billing's replayed dead letter: body %q, want the one it died with", got.Body)
		}
	}},
	{name: "destinations/a lease is fenced in its own queue", run: func(t *testing.T, s Store) {
		now := clock().Add(time.Hour)
		expect(t, "accept", accept(t, s, fanOut("e", 0), eventOf("e", now)), dedupe.Claimed)
		died := leaseOneIn(t, s, billing, now)
		other := leaseOneIn(t, s, analytics, now)
		took := leaseOneIn(t, s, billing, now.Add(time.Minute))
		died.State = dedupe.Delivered
		expectErr(t, "billing's lapsed holder", s.Update(context.Background(), died, time.Hour), dedupe.ErrLeaseLost)
		other.State = dedupe.Delivered
		update(t, s, other, time.Hour) // its lease, in its queue, is untouched by billing's
		took.State = dedupe.Dead
		update(t, s, took, time.Hour)
		if got := getIn(t, s, billing, "e").State; got != dedupe.Dead {
			t.Errorf("billing: %s, want the newer holder's dead", got)
		}
	}},
	{name: "destinations/a version delivered to one destination is not delivered for another", run: func(t *testing.T, s Store) {
		at := clock().Add(-time.Minute)
		c, ev := versionedEvent("v2", "cus_1", 2, at)
		c.Destinations = fanOut("v2", 0).Destinations
		expect(t, "accept v2", accept(t, s, c, ev), dedupe.Claimed)
		got := leaseOneIn(t, s, billing, time.Now())
		got.State = dedupe.Delivered
		update(t, s, got, time.Hour)
		for q, want := range map[string]bool{legacy: false, billing: true, analytics: false} {
			v, found, err := s.DeliveredVersion(context.Background(), q, "cus_1")
			if err != nil || found != want || (found && v != 2) {
				t.Errorf("DeliveredVersion in %q: %d, %v, %v; want found %v", q, v, found, err, want)
			}
		}
		c, ev = versionedEvent("v1", "cus_1", 1, at)
		c.Destinations = fanOut("v1", 0).Destinations
		expect(t, "accept v1 after v2, for all", accept(t, s, c, ev), dedupe.Stale)
	}},
	{name: "destinations/the default destination's queue is the route's own, with or without Destinations", run: func(t *testing.T, s Store) {
		if legacy != ns {
			t.Fatalf("QueueNamespace(%q, %q) = %q, want the route's own", ns, dedupe.DefaultDestination, legacy)
		}
		at := clock().Add(-time.Minute)
		expect(t, "accept plain", accept(t, s, claimOf("plain"), eventOf("plain", at)), dedupe.Claimed)
		c := claimOf("named")
		c.Destinations = []dedupe.Destination{{Name: "billing"}}
		expect(t, "accept for billing alone", accept(t, s, c, eventOf("named", at.Add(time.Millisecond))), dedupe.Claimed)
		expectIDs(t, "the route's queue", leaseIn(t, s, ns, time.Now(), 10), "plain")
		expectIDs(t, "billing's", leaseIn(t, s, billing, time.Now(), 10), "named")
	}},
	{name: "destinations/a bad or repeated destination name is an error, and nothing is stored", run: func(t *testing.T, s Store) {
		for _, d := range [][]dedupe.Destination{
			{{Name: "billing"}, {Name: "billing"}},
			{{Name: "a/b"}},
			{{Name: ""}},
			{{Name: "x\x00y"}},
		} {
			c := claimOf("e")
			c.Destinations = d
			if out, err := s.Accept(context.Background(), c, eventOf("e", clock()), dedupeTTL); err == nil {
				t.Errorf("Accept for %q: %v, want an error", fmt.Sprint(d), out)
			}
		}
		expect(t, "the ID after the refusals", accept(t, s, claimOf("e"), eventOf("e", clock())), dedupe.Claimed)
	}},
}

// destinationNodesChecks are the promises of destinations on a store shared by two nodes.
var destinationNodesChecks = []nodesCheck{
	{name: "nodes/an entity held in one destination's queue on one node is leased from another's on the other", run: func(t *testing.T, a, b Store) {
		at := clock().Add(-time.Minute)
		c, ev := versionedEvent("v1", "cus_1", 1, at)
		c.Destinations = fanOut("v1", 0).Destinations
		expect(t, "accept", accept(t, a, c, ev), dedupe.Claimed)
		leaseOneIn(t, a, billing, time.Now())
		if got := leaseOneIn(t, b, analytics, time.Now()); got.ID != "v1" {
			t.Errorf("b leased %q from analytics", got.ID)
		}
		expectIDs(t, "billing on b while a holds it", leaseIn(t, b, billing, time.Now(), 10), "")
	}},
}

func leaseIn(t *testing.T, s Store, queue string, now time.Time, n int) []*dedupe.Event {
	t.Helper()
	evs, err := s.Lease(context.Background(), queue, now, n, time.Minute)
	if err != nil {
		t.Fatalf("Lease(%q): %v", queue, err)
	}
	return evs
}

// leaseOneIn leases the single event due at now in queue.
func leaseOneIn(t *testing.T, s Store, queue string, now time.Time) *dedupe.Event {
	t.Helper()
	evs := leaseIn(t, s, queue, now, 10)
	if len(evs) != 1 {
		t.Fatalf("Lease(%q, %v) handed out [%s], want one event", queue, now, ids(evs))
	}
	return evs[0]
}

func getIn(t *testing.T, s Store, queue, id string) *dedupe.Event {
	t.Helper()
	ev, err := s.Get(context.Background(), queue, id)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", queue, id, err)
	}
	return ev
}

func listIn(t *testing.T, s Store, queue string, state dedupe.State) []*dedupe.Event {
	t.Helper()
	evs, err := s.List(context.Background(), queue, state, dedupe.Cursor{}, 100)
	if err != nil {
		t.Fatalf("List(%q, %s): %v", queue, state, err)
	}
	return evs
}

func replayIn(t *testing.T, s Store, queue, id string) {
	t.Helper()
	if err := s.Replay(context.Background(), queue, id, time.Now()); err != nil {
		t.Fatalf("Replay(%q, %q): %v", queue, id, err)
	}
}

// copyChecks are the promises of DoneAndQueue: a sync-mode claim settled and its event queued
// for copy destinations in one write.
var copyChecks = []check{
	{name: "doneandqueue/marks the claimed ID done, advances its version and queues the event for each destination", run: func(t *testing.T, s Store) {
		at := clock().Add(-time.Minute)
		c, ev := versionedEvent("e", "cus_1", 5, at)
		expect(t, "claim", claim(t, s, c), dedupe.Claimed)
		c.Destinations = []dedupe.Destination{{Name: "billing"}, {Name: "analytics"}}
		doneAndQueue(t, s, c, ev)
		expect(t, "the ID again", claim(t, s, claimOf("e")), dedupe.Duplicate)
		expect(t, "an older version", claim(t, s, versioned("old", "cus_1", 4)), dedupe.Stale)
		for _, q := range []string{billing, analytics} {
			got := leaseOneIn(t, s, q, time.Now())
			if got.ID != "e" || !bytes.Equal(got.Body, ev.Body) || got.Entity != "cus_1" || got.Version != 5 || !got.AcceptedAt.Equal(at) {
				t.Errorf("leased from %q: %+v; want the event as the app took it", q, got)
			}
		}
		expectIDs(t, "the route's own queue", leaseIn(t, s, legacy, time.Now(), 10), "")
	}},
	{name: "doneandqueue/ignores MaxPending: the app already took the event", run: func(t *testing.T, s Store) {
		at := clock().Add(-time.Minute)
		for _, id := range []string{"a", "b"} {
			c := claimOf(id)
			expect(t, "claim "+id, claim(t, s, c), dedupe.Claimed)
			c.Destinations = []dedupe.Destination{{Name: "billing", MaxPending: 1}}
			doneAndQueue(t, s, c, eventOf(id, at))
		}
		if n := len(leaseIn(t, s, billing, time.Now(), 10)); n != 2 {
			t.Errorf("billing holds %d events past its bound of 1, want both", n)
		}
	}},
	{name: "doneandqueue/a destination still holding a delivery of the ID keeps it", run: func(t *testing.T, s Store) {
		at := clock().Add(-time.Minute)
		c := claimOf("e")
		c.Destinations = []dedupe.Destination{{Name: "billing"}}
		expect(t, "claim", claim(t, s, c), dedupe.Claimed)
		doneAndQueue(t, s, c, eventOf("e", at))
		first := leaseOneIn(t, s, billing, time.Now())
		first.State = dedupe.Dead
		update(t, s, first, time.Hour)
		// The ID's dedupe window ends: a claim with no ID stands for the provider's resend.
		again := dedupe.Claim{Namespace: ns, Destinations: c.Destinations}
		doneAndQueue(t, s, again, eventOf("e", at.Add(time.Second)))
		if got := getIn(t, s, billing, "e"); got.State != dedupe.Dead || !got.AcceptedAt.Equal(at) {
			t.Errorf("billing's delivery of e: %s accepted %v, want the dead letter kept", got.State, got.AcceptedAt)
		}
	}},
	{name: "doneandqueue/without destinations is an error, and nothing is done", run: func(t *testing.T, s Store) {
		c := claimOf("e")
		expect(t, "claim", claim(t, s, c), dedupe.Claimed)
		if err := s.DoneAndQueue(context.Background(), c, eventOf("e", clock()), dedupeTTL); err == nil {
			t.Error("DoneAndQueue with no destination succeeded")
		}
		release(t, s, c)
		expect(t, "the ID after the refusal", claim(t, s, c), dedupe.Claimed)
	}},
}

func doneAndQueue(t *testing.T, s Store, c dedupe.Claim, ev *dedupe.Event) {
	t.Helper()
	if err := s.DoneAndQueue(context.Background(), c, ev, dedupeTTL); err != nil {
		t.Fatalf("DoneAndQueue(%q): %v", ev.ID, err)
	}
}
