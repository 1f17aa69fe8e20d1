package redisstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// acceptAt accepts id of entity (version v) due at due.
func acceptAt(t *testing.T, s *Store, id, entity string, v int64, due time.Time) {
	t.Helper()
	ev := queued(id, base)
	ev.Entity, ev.Version, ev.NextAttempt = entity, v, due
	c := versioned(id, entity, v)
	if out, err := s.Accept(ctx, c, ev, time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("Accept %s: %v %v", id, out, err)
	}
}

func TestOneEntityOnOneNodeAtATime(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	acceptAt(t, a, "x1", "cus_x", 1, base)
	acceptAt(t, a, "x2", "cus_x", 2, base.Add(time.Second))
	acceptAt(t, a, "y1", "cus_y", 1, base.Add(2*time.Second))
	now := base.Add(time.Minute)

	if got := lease(t, a, now, 1); !slices.Equal(ids(got), []string{"x1"}) {
		t.Fatalf("node A's lease of 1: %v, want [x1]", ids(got))
	}
	got := lease(t, b, now, 10)
	if !slices.Equal(ids(got), []string{"y1"}) {
		t.Fatalf("node B's lease while A holds x1: %v, want [y1]", ids(got))
	}
	x2, err := b.Get(ctx, ns, "x2")
	if err != nil || x2.State != dedupe.Pending || !x2.NextAttempt.Equal(base.Add(time.Second)) {
		t.Fatalf("the waiting event: %+v %v, want pending and still due at its own time", x2, err)
	}
	x1, _ := a.Get(ctx, ns, "x1")
	x1.LeaseToken, x1.State = 1, dedupe.Delivered
	if err := a.Update(ctx, x1, time.Hour); err != nil {
		t.Fatal(err)
	}
	if next := lease(t, b, now, 10); !slices.Equal(ids(next), []string{"x2"}) {
		t.Fatalf("node B's lease once x1 is delivered: %v, want [x2]", ids(next))
	}
}

// One Lease hands all of an entity's due events to its caller, as Badger does (the deliverer
// sends the newest and supersedes or postpones the others); no other node gets any of the
// entity's events until every one of them is updated.
func TestABatchHoldsItsEntityUntilEveryEventIsUpdated(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	acceptAt(t, a, "x1", "cus_x", 1, base)
	acceptAt(t, a, "x2", "cus_x", 2, base.Add(time.Second))
	now := base.Add(time.Minute)
	batch := lease(t, a, now, 10)
	if !slices.Equal(ids(batch), []string{"x1", "x2"}) {
		t.Fatalf("node A's lease: %v, want [x1 x2]", ids(batch))
	}
	// A postpones x1 while it sends x2.
	batch[0].NextAttempt = now.Add(time.Second)
	if err := a.Update(ctx, batch[0], 0); err != nil {
		t.Fatal(err)
	}
	if got := lease(t, b, now.Add(time.Second), 10); len(got) != 0 {
		t.Fatalf("node B's lease while A sends x2: %v, want none", ids(got))
	}
	batch[1].State = dedupe.Delivered
	if err := a.Update(ctx, batch[1], time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := lease(t, b, now.Add(time.Second), 10); !slices.Equal(ids(got), []string{"x1"}) {
		t.Fatalf("node B's lease once x2 is delivered: %v, want [x1]", ids(got))
	}
}

func TestEntityFreedByAnyUpdateOfItsHolder(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	acceptAt(t, s, "x1", "cus_x", 1, base)
	acceptAt(t, s, "x2", "cus_x", 2, base)
	held := lease(t, s, base, 1)
	if !slices.Equal(ids(held), []string{"x1"}) {
		t.Fatalf("lease: %v", ids(held))
	}
	if got := lease(t, s, base, 10); len(got) != 0 {
		t.Fatalf("lease while x1 is held: %v", ids(got))
	}
	held[0].NextAttempt = base.Add(time.Hour) // retry later
	if err := s.Update(ctx, held[0], 0); err != nil {
		t.Fatal(err)
	}
	if next := lease(t, s, base, 10); !slices.Equal(ids(next), []string{"x2"}) {
		t.Fatalf("lease once x1 is rescheduled: %v, want [x2]", ids(next))
	}
}

func TestEntityFreedWhenItsHolderLapses(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	acceptAt(t, a, "x1", "cus_x", 1, base)
	acceptAt(t, a, "x2", "cus_x", 2, base.Add(time.Second))
	if got := lease(t, a, base.Add(time.Second), 1); !slices.Equal(ids(got), []string{"x1"}) {
		t.Fatalf("lease: %v", ids(got)) // node A dies holding x1
	}
	if got := lease(t, b, base.Add(30*time.Second), 10); len(got) != 0 {
		t.Fatalf("within x1's lease: %v", ids(got))
	}
	// After the lapse both are due, x2 first.
	if got := lease(t, b, base.Add(2*time.Minute), 10); !slices.Equal(ids(got), []string{"x2", "x1"}) {
		t.Fatalf("after x1's lease lapsed: %v, want [x2 x1]", ids(got))
	}
}

// Events waiting for their entity cost a Lease nothing: thousands of one entity's events due
// first do not keep another entity's event from going out.
func TestWaitingEventsDoNotStarveOthers(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	tag, _ := s.tag(ns)
	if err := acceptScript.Load(ctx, s.client).Err(); err != nil { // a pipeline cannot fall back to EVAL
		t.Fatal(err)
	}
	pipe := s.client.Pipeline()
	for i := range 3000 {
		ev := queued(fmt.Sprint("x", i), base)
		ev.Entity, ev.Version = "busy", int64(i)
		keys, args := acceptCall(tag, dedupe.Claim{Namespace: ns}, []dedupe.Destination{{Name: dedupe.DefaultDestination}}, ev, time.Hour, fmt.Sprint("call", i), base)
		acceptScript.Run(ctx, pipe, keys, args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	acceptAt(t, s, "other", "calm", 1, base.Add(time.Second))
	now := base.Add(time.Minute)
	var leased []string
	for range 20 {
		leased = append(leased, ids(lease(t, s, now, 4))...)
		if slices.Contains(leased, "other") {
			break
		}
	}
	if !slices.Contains(leased, "other") || len(leased) != 5 {
		t.Fatalf("20 leases of 4: %d events (%.5v...), want the busy entity's first 4 and the other", len(leased), leased)
	}
}
