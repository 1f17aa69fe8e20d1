package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// List reads past any number of members of events gone from Redis (which no trimming reached),
// however many runs of its script that takes.
func TestListPastManyGoneEvents(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	accept(t, s, claim("live"), base)
	evs := lease(t, s, base.Add(time.Second), 1)
	evs[0].State = dedupe.Delivered
	if err := s.Update(ctx, evs[0], time.Hour); err != nil {
		t.Fatal(err)
	}
	tag, _ := s.tag(ns)
	gone := make([]redis.Z, 3*listScan)
	for i := range gone {
		gone[i] = redis.Z{Member: listMember(base.Add(-time.Hour), fmt.Sprintf("gone%05d", i))}
	}
	s.client.ZAdd(ctx, tag+"s:delivered", gone...)
	got, err := s.List(ctx, ns, dedupe.Delivered, dedupe.Cursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "live" {
		t.Fatalf("List of delivered events behind %d members of gone events: %v, want [live]", len(gone), ids(got))
	}
}

// Thousands of one held entity's events due first, which Lease moves off the queue to wait, do
// not keep another entity's event from going out within a few calls (the deliverer pauses a
// second after a call that hands out nothing).
func TestManyWaitingEventsDoNotStarveOthers(t *testing.T) {
	t.Parallel()
	// A server of its own: its scripts over 20,000 events would hold up the shared server (one
	// thread) for seconds, and every test on it with them.
	s := storeAt(t, redistest.Run(t, redistest.Durable...).Addr, newPrefix())
	tag, _ := s.tag(ns)
	acceptAt(t, s, "held0", "held", 0, base)
	if got := lease(t, s, base.Add(time.Second), 1); len(got) != 1 {
		t.Fatalf("Lease of the held entity's first event: %v", ids(got))
	}
	if err := acceptScript.Load(ctx, s.client).Err(); err != nil { // a pipeline cannot fall back to EVAL
		t.Fatal(err)
	}
	// In pipelines of 1000: one of 20,000 scripts (10 MB) may not be written within the client's
	// write timeout on a loaded machine, and a retried pipeline would run them all again.
	for from := 1; from <= 20000; from += 1000 {
		pipe := s.client.Pipeline()
		for i := from; i < from+1000; i++ {
			ev := queued(fmt.Sprint("held", i), base)
			ev.Entity, ev.Version = "held", int64(i)
			keys, args := acceptCall(tag, dedupe.Claim{Namespace: ns}, []dedupe.Destination{{Name: dedupe.DefaultDestination}}, ev, time.Hour, fmt.Sprint("call", i), base)
			acceptScript.Run(ctx, pipe, keys, args...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	acceptAt(t, s, "other", "calm", 1, base.Add(time.Second))
	for call := 1; call <= 3; call++ {
		got := lease(t, s, base.Add(2*time.Second), 4)
		if len(got) > 0 {
			if len(got) != 1 || got[0].ID != "other" {
				t.Fatalf("Lease %d: %v, want [other]", call, ids(got))
			}
			return
		}
	}
	t.Fatal("the other entity's event did not come out within 3 Lease calls behind 20,000 waiting events of a held entity")
}
