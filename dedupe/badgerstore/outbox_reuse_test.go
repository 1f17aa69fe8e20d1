package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// The contract (dedupe/outbox.go Accept) says an ID "queued in any state" is a
// Duplicate. Badger's Accept only reads the records of the queues the *new* claim names, so an
// ID whose event is still queued (here: a dead letter kept for replay) in a destination the new
// claim does not name is accepted again, and the new Accept overwrites the payload the other
// queue's record still points at (the payload is shared, stored under the route).
//
// How a gateway gets there: the defaults are dedupe_ttl 72h, keep 24h, dead_ttl 720h. An event
// goes to billing and analytics; analytics delivers it, billing dead-letters it. Later (after
// 72h) the same ID comes again, but the destinations that take it are different: billing was
// renamed/removed (docs/fan-out.md: "its events are delivered again once a destination of that
// name is back"), or billing's `only` does not take the new body. analytics' record has expired
// (24h keep), billing's is not looked at.
func TestReusedIDForOtherDestinationsKeepsTheDeadLetter(t *testing.T) {
	b := openTest(t)
	now := base
	b.clock = func() time.Time { return now }
	ctx := context.Background()
	billing := dedupe.QueueNamespace("stripe", "billing")
	analytics := dedupe.QueueNamespace("stripe", "analytics")

	first := queued("e", base)
	first.Body = []byte(`{"id":"e","type":"invoice.paid","first":true}`)
	c := event("e")
	c.Destinations = []dedupe.Destination{{Name: "billing"}, {Name: "analytics"}}
	expect(t, "accept", accept(t, b, c, first), dedupe.Claimed)

	for q, state := range map[string]dedupe.State{analytics: dedupe.Delivered, billing: dedupe.Dead} {
		evs, err := b.Lease(ctx, q, now, 10, time.Minute)
		if err != nil || len(evs) != 1 {
			t.Fatalf("Lease(%q): %d, %v", q, len(evs), err)
		}
		evs[0].State = state
		keep := 24 * time.Hour
		if state == dedupe.Dead {
			keep = 720 * time.Hour
		}
		update(t, b, evs[0], keep)
	}

	now = base.Add(73 * time.Hour) // past the dedupe TTL (1h here, 72h by default) and analytics' keep
	second := queued("e", now)
	second.Body = []byte(`{"id":"e","type":"charge.succeeded","second":true}`)
	c2 := event("e")
	c2.Destinations = []dedupe.Destination{{Name: "analytics"}}
	out := accept(t, b, c2, second)
	if out != dedupe.Duplicate {
		t.Errorf("Accept of ID e, still queued (dead) in billing: %v, want duplicate (\"queued in any state\")", out)
	}

	dead, err := b.Get(ctx, billing, "e")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dead.Body, first.Body) {
		t.Errorf("billing's dead letter now holds body %q, want its own %q", dead.Body, first.Body)
	}

	if out == dedupe.Claimed { // analytics delivers the second event: the shared payload is shed
		evs, err := b.Lease(ctx, analytics, now, 10, time.Minute)
		if err != nil || len(evs) != 1 {
			t.Fatalf("Lease(analytics): %d, %v", len(evs), err)
		}
		evs[0].State = dedupe.Delivered
		update(t, b, evs[0], 24*time.Hour)
	}
	if err := b.Replay(ctx, billing, "e", now); err != nil && !errors.Is(err, dedupe.ErrNotDead) {
		t.Fatal(err)
	}
	evs, err := b.Lease(ctx, billing, now, 10, time.Minute)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Lease(billing) after replay: %d, %v", len(evs), err)
	}
	if !bytes.Equal(evs[0].Body, first.Body) {
		t.Errorf("billing's replay sends body %q, want %q", evs[0].Body, first.Body)
	}
}

// The same with a delivery still Pending in a destination that the config dropped
// for a while (docs/fan-out.md: a removed destination's queue is "delivered again once a
// destination of that name is back"). The provider sends the ID again after the dedupe window;
// only the remaining destination takes it, delivers it, and the payload is shed: when billing is
// back, its pending delivery has no body.
func TestReusedIDShedsTheBodyOfAStrandedPendingDelivery(t *testing.T) {
	b := openTest(t)
	now := base
	b.clock = func() time.Time { return now }
	ctx := context.Background()
	billing := dedupe.QueueNamespace("stripe", "billing")

	first := queued("e", base)
	c := event("e")
	c.Destinations = []dedupe.Destination{{Name: dedupe.DefaultDestination}, {Name: "billing"}}
	expect(t, "accept", accept(t, b, c, first), dedupe.Claimed)
	evs, err := b.Lease(ctx, "stripe", now, 10, time.Minute)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Lease(default): %d, %v", len(evs), err)
	}
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], 24*time.Hour)
	// billing is removed from the config: its delivery waits, Pending.

	now = base.Add(73 * time.Hour)
	again := queued("e", now)
	expect(t, "the ID again, for default alone", accept(t, b, event("e"), again), dedupe.Duplicate)
	if evs, err := b.Lease(ctx, "stripe", now, 10, time.Minute); err == nil && len(evs) == 1 {
		evs[0].State = dedupe.Delivered
		update(t, b, evs[0], 24*time.Hour)
	}

	// billing is back.
	evs, err = b.Lease(ctx, billing, now, 10, time.Minute)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Lease(billing): %d, %v", len(evs), err)
	}
	if !bytes.Equal(evs[0].Body, first.Body) {
		t.Errorf("billing's pending delivery leased with body %q, want %q", evs[0].Body, first.Body)
	}
}
