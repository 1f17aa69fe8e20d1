package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
)

// A queue entry whose event hash is missing (Redis lost it, or a restore has not brought it back
// yet) stays queued, and the event goes out once its hash is there again.
func TestQueueEntryOutlivesMissingHash(t *testing.T) {
	s := newStore(t)
	accept(t, s, claim("e1"), base)
	tag, _ := s.tag(ns)
	dump, err := s.client.Dump(ctx, tag+"e:e1").Result()
	if err != nil {
		t.Fatal(err)
	}
	s.client.Del(ctx, tag+"e:e1")
	if got := lease(t, s, base.Add(time.Second), 10); len(got) != 0 {
		t.Fatalf("Lease without the event's hash: %v", ids(got))
	}
	if err := s.client.Restore(ctx, tag+"e:e1", 0, dump).Err(); err != nil {
		t.Fatal(err)
	}
	if got := lease(t, s, base.Add(2*time.Second), 10); len(got) != 1 || got[0].ID != "e1" {
		t.Fatalf("Lease once the hash is back: %v, want [e1]", ids(got))
	}
}

// List reads past any number of members of events gone from Redis (which no trimming reached),
// however many runs of its script that takes.
func TestListPastManyGoneEvents(t *testing.T) {
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
