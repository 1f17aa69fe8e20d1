package redisstore

import (
	"testing"
	"time"
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
