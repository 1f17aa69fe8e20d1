package redisstore

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// orderedIn is a claim of id queued for billing under order key (and for analytics,
// unordered, when both).
func orderedIn(id, key string, both bool) dedupe.Claim {
	c := claim(id)
	c.Destinations = []dedupe.Destination{{Name: "billing", OrderKey: key}}
	if both {
		c.Destinations = append(c.Destinations, dedupe.Destination{Name: "analytics"})
	}
	return c
}

// leaseQueue leases up to n events of queue at now for a minute.
func leaseQueue(t *testing.T, s *Store, queue string, now time.Time, n int) []*dedupe.Event {
	t.Helper()
	evs, err := s.Lease(ctx, queue, now, n, time.Minute)
	if err != nil {
		t.Fatalf("Lease(%s): %v", queue, err)
	}
	return evs
}

// settle leases the one due event of queue at now and records state (OnDead onDead), kept for keep.
func settle(t *testing.T, s *Store, queue string, now time.Time, state dedupe.State, onDead dedupe.OnDead, keep time.Duration) *dedupe.Event {
	t.Helper()
	evs := leaseQueue(t, s, queue, now, 10)
	if len(evs) != 1 {
		t.Fatalf("Lease(%s) handed out %v, want one event", queue, ids(evs))
	}
	ev := evs[0]
	ev.State, ev.OnDead = state, onDead
	if err := s.Update(ctx, ev, keep); err != nil {
		t.Fatalf("Update %s to %s: %v", ev.ID, state, err)
	}
	return ev
}

func TestOrderedHeldHeadKeepsItsHashBodyAndListingUntilSkipped(t *testing.T) {
	s := newStore(t)
	tag, _ := s.tag(ns)
	bq := tag + queuePrefix("billing")
	expect(t, "accept e1", accept(t, s, orderedIn("e1", "k", true), base), dedupe.Claimed)
	expect(t, "accept e2", accept(t, s, orderedIn("e2", "k", false), base), dedupe.Claimed)
	// analytics delivers e1: its shared body is kept for billing's dead head alone.
	settle(t, s, analytics, base, dedupe.Delivered, dedupe.Hold, time.Hour)
	settle(t, s, billing, base, dedupe.Dead, dedupe.Hold, 200*time.Millisecond)
	// Another dead letter, of another key under Skip, gives the Dead listing a TTL if nothing keeps it.
	expect(t, "accept other", accept(t, s, orderedIn("other", "j", false), base), dedupe.Claimed)
	settle(t, s, billing, base, dedupe.Dead, dedupe.Skip, 200*time.Millisecond)

	for _, k := range []string{bq + "e:e1", tag + "p:e1", bq + "s:dead"} {
		if ttl := s.client.PTTL(ctx, k).Val(); ttl != -1 {
			t.Errorf("%s while its key is held: PTTL %v, want none", k, ttl)
		}
	}
	time.Sleep(400 * time.Millisecond)
	got, err := s.Get(ctx, billing, "e1")
	if err != nil || got.State != dedupe.Dead || !got.Holds || string(got.Body) != `{"id":"e1"}` {
		t.Fatalf("the held head after its keep: %+v, %v", got, err)
	}
	dead, err := s.List(ctx, billing, dedupe.Dead, dedupe.Cursor{}, 10)
	if err != nil || !slices.Equal(ids(dead), []string{"e1"}) || !dead[0].Holds || dead[0].OrderKey != "k" {
		t.Fatalf("dead letters: %v, %v; want the held e1 alone", ids(dead), err)
	}
	if n, err := s.CountHeld(ctx, billing); err != nil || n != 1 {
		t.Fatalf("CountHeld: %d, %v", n, err)
	}

	if err := s.Skip(ctx, billing, "e1", time.Now(), time.Hour); err != nil {
		t.Fatalf("Skip: %v", err)
	}
	for _, k := range []string{bq + "e:e1", tag + "p:e1", bq + "s:dead", bq + "x"} {
		if ttl := s.client.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s once skipped: PTTL %v, want one", k, ttl)
		}
	}
	if n := s.client.Exists(ctx, bq+"H").Val(); n != 0 {
		t.Errorf("the held keys' index outlives the last hold")
	}
	if evs := leaseQueue(t, s, billing, base, 10); !slices.Equal(ids(evs), []string{"e2"}) {
		t.Fatalf("after the skip: %v, want e2", ids(evs))
	}
}

func TestOrderedSkippedDeadLetterReplayedGoesToItsKeysTail(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"e1", "e2", "e3"} {
		expect(t, "accept "+id, accept(t, s, orderedIn(id, "k", false), base), dedupe.Claimed)
	}
	settle(t, s, billing, base, dedupe.Dead, dedupe.Skip, time.Hour)
	if err := s.Replay(ctx, billing, "e1", base); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	e1, err := s.Get(ctx, billing, "e1")
	if err != nil {
		t.Fatal(err)
	}
	e3, _ := s.Get(ctx, billing, "e3")
	if e1.State != dedupe.Pending || e1.Seq <= e3.Seq || !e1.NextAttempt.IsZero() {
		t.Fatalf("the replayed e1: %s, seq %d (e3's %d), due %v; want waiting behind e3", e1.State, e1.Seq, e3.Seq, e1.NextAttempt)
	}
	for _, want := range []string{"e2", "e3", "e1"} {
		if got := settle(t, s, billing, base, dedupe.Delivered, dedupe.Hold, time.Hour); got.ID != want {
			t.Fatalf("leased %s, want %s", got.ID, want)
		}
	}
	// Replayed into an empty key, a skipped dead letter is its head at once.
	expect(t, "accept e4", accept(t, s, orderedIn("e4", "j", false), base), dedupe.Claimed)
	settle(t, s, billing, base, dedupe.Dead, dedupe.Skip, time.Hour)
	if err := s.Replay(ctx, billing, "e4", base); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if evs := leaseQueue(t, s, billing, base, 10); !slices.Equal(ids(evs), []string{"e4"}) {
		t.Fatalf("after replaying e4 into its empty key: %v", ids(evs))
	}
}

func TestOrderedHeldKeysPageByKey(t *testing.T) {
	s := newStore(t)
	before := time.Now()
	for _, key := range []string{"c", "a", "b"} {
		for i := range 3 {
			id := key + string(rune('1'+i))
			expect(t, "accept "+id, accept(t, s, orderedIn(id, key, false), base), dedupe.Claimed)
		}
	}
	for _, ev := range leaseQueue(t, s, billing, base, 10) {
		ev.State = dedupe.Dead
		if err := s.Update(ctx, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.HeldKeys(ctx, billing, "", 2)
	if err != nil || len(page) != 2 || page[0].Key != "a" || page[1].Key != "b" {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	if h := page[0]; h.Head != "a1" || h.Waiting != 2 || h.Since.Before(before) || h.Since.After(time.Now()) {
		t.Errorf("held key a: %+v", h)
	}
	page, err = s.HeldKeys(ctx, billing, "b", 2)
	if err != nil || len(page) != 1 || page[0].Key != "c" || page[0].Head != "c1" {
		t.Fatalf("second page: %+v, %v", page, err)
	}
	if n, err := s.CountHeld(ctx, billing); err != nil || n != 3 {
		t.Fatalf("CountHeld: %d, %v", n, err)
	}
}

func TestOrderedSkipRunAgainAfterALostReplyIsOK(t *testing.T) {
	s := newStore(t)
	tag, _ := s.tag(ns)
	bq := tag + queuePrefix("billing")
	for _, id := range []string{"e1", "e2"} {
		expect(t, "accept "+id, accept(t, s, orderedIn(id, "k", false), base), dedupe.Claimed)
	}
	settle(t, s, billing, base, dedupe.Dead, dedupe.Hold, time.Hour)
	keys := append(scriptKeys(bq, "e:e1", "q", "x", "K", "H", "s:dead"), tag+"p:e1")
	args := []any{"e1", micros(base), millis(time.Hour), "call"}
	for i := range 2 {
		if res, err := skipScript.Run(ctx, s.client, keys, args...).StringSlice(); err != nil || res[0] != "ok" {
			t.Fatalf("run %d: %v, %v", i, res, err)
		}
	}
	if err := s.Skip(ctx, billing, "e1", base, time.Hour); !errors.Is(err, dedupe.ErrNotHeld) {
		t.Fatalf("another Skip: %v, want ErrNotHeld", err)
	}
}

func TestUnorderedEventsWriteNoOrderKeysOrFields(t *testing.T) {
	s := newStore(t)
	c := claim("e1")
	c.Destinations = []dedupe.Destination{{Name: "billing"}, {Name: "analytics"}}
	expect(t, "accept", accept(t, s, c, base), dedupe.Claimed)
	settle(t, s, billing, base, dedupe.Dead, dedupe.Hold, time.Hour)
	if err := s.Replay(ctx, billing, "e1", base); err != nil {
		t.Fatal(err)
	}
	settle(t, s, billing, base, dedupe.Delivered, dedupe.Hold, time.Hour)
	for _, k := range keysOfPrefix(t, s.client, s.escapedPrefix) {
		if strings.HasSuffix(k.name, "}:n") || strings.Contains(k.name, ":k:") || strings.HasSuffix(k.name, ":H") || strings.HasSuffix(k.name, ":K") {
			t.Errorf("an unordered event wrote %s", k.name)
		}
		if fields, _ := s.client.HKeys(ctx, k.name).Result(); slices.ContainsFunc(fields, func(f string) bool {
			return f == fieldOrderKey || f == fieldSeq || f == fieldHolds
		}) {
			t.Errorf("an unordered event's %s has fields %v", k.name, fields)
		}
	}
}

func TestOrderedDoneAndQueueQueuesInOrder(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"e1", "e2"} {
		c := orderedIn(id, "k", false)
		if _, err := s.Claim(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := s.DoneAndQueue(ctx, c, queued(id, base), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"e1", "e2"} {
		if got := settle(t, s, billing, base, dedupe.Delivered, dedupe.Hold, time.Hour); got.ID != want || got.Seq == 0 {
			t.Fatalf("leased %s (seq %d), want %s", got.ID, got.Seq, want)
		}
	}
}

// A key's head whose delivery hash, or shared header and body, is gone from Redis (evicted,
// deleted by hand, lost in a failover) is dropped by the Lease that meets it, and releases its
// key: the next event of the key is leased, in order, rather than waiting behind it for good.
func TestOrderedHeadWhoseEventIsGoneReleasesItsKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		both bool   // queued for analytics too: its header and body are shared (T p:<id>)
		gone string // the key deleted, after T
	}{
		{name: "delivery hash", gone: "@billing:e:e1"},
		{name: "shared body", both: true, gone: "p:e1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			gone := 0
			s.OnGoneEvents(func(_ string, n int) { gone += n })
			for _, id := range []string{"e1", "e2", "e3"} {
				expect(t, "accept "+id, accept(t, s, orderedIn(id, "k", tc.both), base), dedupe.Claimed)
			}
			expect(t, "accept j1", accept(t, s, orderedIn("j1", "j", false), base), dedupe.Claimed)
			tag, _ := s.tag(ns)
			if err := s.client.Del(ctx, tag+tc.gone).Err(); err != nil {
				t.Fatal(err)
			}
			var leased []string
			for range 2 {
				for _, ev := range leaseQueue(t, s, billing, base, 10) {
					leased = append(leased, ev.ID)
					ev.State = dedupe.Delivered
					if ev.ID == "j1" {
						if err := s.Update(ctx, ev, time.Hour); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			slices.Sort(leased)
			if !slices.Equal(leased, []string{"e2", "j1"}) || gone != 1 {
				t.Fatalf("leased %v and %d gone; want e2, the next of the gone head's key, and j1, with e1 gone", leased, gone)
			}
			bq := tag + queuePrefix("billing")
			if first, err := s.client.ZRange(ctx, bq+"k:k", 0, -1).Result(); err != nil || !slices.Equal(first, []string{"e2", "e3"}) {
				t.Errorf("key k's FIFO: %v, %v; want e2, e3", first, err)
			}
			if heads, err := s.client.HGetAll(ctx, bq+"K").Result(); err != nil || !maps.Equal(heads, map[string]string{"e2": "k"}) {
				t.Errorf("the heads' keys: %v, %v; want e2's alone", heads, err)
			}
			if n, err := s.CountHeld(ctx, billing); err != nil || n != 0 {
				t.Errorf("CountHeld: %d, %v", n, err)
			}
		})
	}
}
