package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// versionTTL is the Claim.VersionTTL of the checks that wait for it. Badger keeps a version's
// TTL to the second, rounding down, so a version advanced at t expires in (t+versionTTL-1s,
// t+versionTTL]: the checks look for it well before the first bound and after the second.
const versionTTL = 3 * time.Second

// expiryChecks are the promises that take time to show: claims, dedupe records, versions and
// final states expiring. They wait in parallel.
var expiryChecks = []check{
	{name: "claim/a claim whose lease lapsed is Claimed again", waits: true, run: func(t *testing.T, s Store) {
		c := claimOf("a")
		c.Lease = time.Second
		start := time.Now()
		expect(t, "first claim", claim(t, s, c), dedupe.Claimed)
		sleepUntil(start.Add(700 * time.Millisecond))
		var out dedupe.Outcome
		if within(t, start.Add(time.Second), func() { out = claim(t, s, c) }) {
			expect(t, "0.7 s into a 1 s lease", out, dedupe.InFlight)
		}
		sleepUntil(start.Add(time.Second + settle))
		expect(t, "after the lease lapsed", claim(t, s, c), dedupe.Claimed)
	}},
	{name: "done/the ID is Duplicate for the dedupe TTL, then new", waits: true, run: func(t *testing.T, s Store) {
		c := signed("a", "body-A")
		expect(t, "first claim", claim(t, s, c), dedupe.Claimed)
		start := time.Now()
		done(t, s, c, time.Second)
		sleepUntil(start.Add(700 * time.Millisecond))
		var out dedupe.Outcome
		if within(t, start.Add(time.Second), func() { out = claim(t, s, signed("b", "body-A")) }) {
			expect(t, "its digest 0.7 s into a 1 s dedupe window", out, dedupe.Duplicate)
		}
		sleepUntil(start.Add(time.Second + settle))
		expect(t, "after the dedupe window", claim(t, s, c), dedupe.Claimed)
	}},
	{name: "done/the version is forgotten VersionTTL after it advanced, and a stale answer does not refresh it", waits: true, run: func(t *testing.T, s Store) {
		withTTL := func(id string, v int64) dedupe.Claim {
			c := versioned(id, "cus_1", v)
			c.VersionTTL = versionTTL
			return c
		}
		start := time.Now()
		done(t, s, withTTL("v5", 5), dedupeTTL)
		advanced := time.Now() // the TTL began by now: a loaded machine may take long over Done
		expect(t, "older version right after", claim(t, s, withTTL("v3", 3)), dedupe.Stale)
		sleepUntil(start.Add(1500 * time.Millisecond))
		expect(t, "older version 1.5 s later", claim(t, s, withTTL("v4", 4)), dedupe.Stale)
		// Had the stale answer refreshed the version, it would be known until 4.5 s.
		sleepUntil(advanced.Add(versionTTL + settle))
		expect(t, "older version after VersionTTL", claim(t, s, withTTL("v3", 3)), dedupe.Claimed)
	}},
	{name: "done/a newer version restarts VersionTTL", waits: true, run: func(t *testing.T, s Store) {
		withTTL := func(id string, v int64) dedupe.Claim {
			c := versioned(id, "cus_1", v)
			c.VersionTTL = versionTTL
			return c
		}
		first := time.Now()
		done(t, s, withTTL("v1", 1), dedupeTTL)
		sleepUntil(first.Add(2 * time.Second))
		done(t, s, withTTL("v2", 2), dedupeTTL)
		second := time.Now() // the TTL began by now: a loaded machine may take long over Done
		sleepUntil(first.Add(versionTTL + settle))
		expect(t, "VersionTTL after the first advance", claim(t, s, withTTL("old", 1)), dedupe.Stale)
		sleepUntil(second.Add(versionTTL + settle))
		expect(t, "VersionTTL after the second advance", claim(t, s, withTTL("old", 1)), dedupe.Claimed)
	}},
	{name: "accept/the ID and digest are Duplicate for dedupeTTL, after its event's keep, then new", waits: true, run: acceptDedupeExpires},
	{name: "update/final states expire after keep", waits: true, run: finalStatesExpire},
	{name: "deliveredversion/expires with the accepted version", waits: true, run: deliveredVersionExpires},
	{name: "deliveredversion/lives as long as the accepted version a newer event refreshed", waits: true, run: deliveredVersionRefreshed},
}

func acceptDedupeExpires(t *testing.T, s Store) {
	c := signed("a", "body-A")
	start := time.Now()
	if out, err := s.Accept(context.Background(), c, eventOf("a", clock()), 2*time.Second); out != dedupe.Claimed || err != nil {
		t.Fatalf("Accept: %v, %v", out, err)
	}
	settleAs(t, s, time.Now(), dedupe.Delivered, time.Second)
	// keep counts from the Update, which a loaded machine may reach well after start.
	sleepUntil(time.Now().Add(time.Second + settle))
	expectNotFound(t, "after its keep", s, "a")
	var out, digest dedupe.Outcome
	if within(t, start.Add(2*time.Second), func() {
		out = accept(t, s, c, eventOf("a", clock()))
		digest = claim(t, s, signed("b", "body-A"))
	}) {
		expect(t, "accept within dedupeTTL, after its keep", out, dedupe.Duplicate)
		expect(t, "its digest within dedupeTTL", digest, dedupe.Duplicate)
	}
	sleepUntil(start.Add(2*time.Second + settle))
	expect(t, "accept after dedupeTTL", accept(t, s, c, eventOf("a", clock())), dedupe.Claimed)
}

func finalStatesExpire(t *testing.T, s Store) {
	now := clock()
	states := []dedupe.State{dedupe.Delivered, dedupe.Dead, dedupe.Superseded}
	for _, st := range states {
		expect(t, "accept", accept(t, s, claimOf(string(st)), eventOf(string(st), now)), dedupe.Claimed)
	}
	start := time.Now()
	for _, ev := range lease(t, s, time.Now(), 10, time.Minute) {
		ev.State = dedupe.State(ev.ID)
		update(t, s, ev, time.Second)
	}
	updated := time.Now() // keep counts from each Update, which a loaded machine may reach late
	sleepUntil(start.Add(700 * time.Millisecond))
	var got []dedupe.State
	if within(t, start.Add(time.Second), func() {
		for _, st := range states {
			got = append(got, get(t, s, string(st)).State)
		}
	}) {
		for i, st := range states {
			if got[i] != st {
				t.Errorf("0.7 s into a 1 s keep: %s is %s", st, got[i])
			}
		}
	}
	sleepUntil(updated.Add(time.Second + settle))
	for _, st := range states {
		expectNotFound(t, "after keep", s, string(st))
		expectIDs(t, "listed after keep", list(t, s, st, dedupe.Cursor{}, 10), "")
		// The dedupe window outlives the event's record.
		expect(t, "accept again after keep", accept(t, s, claimOf(string(st)), eventOf(string(st), now)), dedupe.Duplicate)
	}
}

func deliveredVersionExpires(t *testing.T, s Store) {
	ctx := context.Background()
	queue := func(id string, v int64) dedupe.Outcome {
		c, ev := versionedEvent(id, "cus_1", v, clock())
		c.VersionTTL = versionTTL
		return accept(t, s, c, ev)
	}
	expect(t, "accept version 5", queue("v5", 5), dedupe.Claimed)
	start := time.Now() // the TTL began by now: a loaded machine may take long over Accept
	settleAs(t, s, time.Now(), dedupe.Delivered, time.Hour)
	if v, ok, err := s.DeliveredVersion(ctx, ns, "cus_1"); v != 5 || !ok || err != nil {
		t.Errorf("DeliveredVersion after delivering 5: %d, %v, %v; want 5", v, ok, err)
	}
	sleepUntil(start.Add(versionTTL + settle))
	if v, ok, err := s.DeliveredVersion(ctx, ns, "cus_1"); ok || err != nil {
		t.Errorf("DeliveredVersion after VersionTTL: %d, %v, %v; want none", v, ok, err)
	}
	expect(t, "an older event after VersionTTL", queue("v3", 3), dedupe.Claimed)
}

// deliveredVersionRefreshed: were the delivered version to keep the expiry the accepted version
// had when it was delivered, it would be gone while a newer accept still keeps the entity's
// version, and a queued older event would then be sent after a newer one was delivered, rather
// than superseded.
func deliveredVersionRefreshed(t *testing.T, s Store) {
	queue := func(id string, v int64) dedupe.Outcome {
		c, ev := versionedEvent(id, "cus_1", v, clock())
		c.VersionTTL = versionTTL
		return accept(t, s, c, ev)
	}
	expect(t, "accept version 2", queue("v2", 2), dedupe.Claimed)
	accepted := time.Now()
	settleAs(t, s, time.Now(), dedupe.Delivered, time.Hour)
	sleepUntil(accepted.Add(1300 * time.Millisecond))
	expect(t, "accept version 3", queue("v3", 3), dedupe.Claimed)
	// Past version 2's VersionTTL, before version 3's (at least 1.3 s - 1 s later).
	sleepUntil(accepted.Add(versionTTL + 150*time.Millisecond))
	var v int64
	var ok bool
	var err error
	if within(t, accepted.Add(versionTTL+300*time.Millisecond), func() {
		v, ok, err = s.DeliveredVersion(context.Background(), ns, "cus_1")
	}) && (v != 2 || !ok || err != nil) {
		t.Errorf("DeliveredVersion while version 3 is still accepted: %d, %v, %v; want 2", v, ok, err)
	}
}
