package ledgertest

import (
	"context"
	"fmt"
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
		leaseHolds(t, s, s)
	}},
	{name: "done/the ID is Duplicate for the dedupe TTL, then new", waits: true, run: func(t *testing.T, s Store) {
		inTime(t, "a 1 s dedupe window holds to its end", func(n int) bool {
			c := signed(fmt.Sprint("a", n), fmt.Sprint("body-A", n))
			expect(t, "first claim", claim(t, s, c), dedupe.Claimed)
			start := alignedStart()
			done(t, s, c, time.Second)
			end := time.Now()
			at, ok := lateCheck(start, end, time.Second)
			if !ok {
				return false
			}
			sleepUntil(at)
			out := claim(t, s, signed(fmt.Sprint("b", n), c.Digest))
			if !time.Now().Before(start.Add(time.Second)) {
				return false
			}
			expect(t, "its digest late in a 1 s dedupe window", out, dedupe.Duplicate)
			sleepUntil(end.Add(time.Second + settle))
			expect(t, "after the dedupe window", claim(t, s, c), dedupe.Claimed)
			return true
		})
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
	inTime(t, "a 2 s dedupe window outlives a 1 s keep", func(n int) bool {
		id := fmt.Sprint("a", n)
		c := signed(id, fmt.Sprint("body-A", n))
		start := alignedStart()
		if out, err := s.Accept(context.Background(), c, eventOf(id, clock()), 2*time.Second); out != dedupe.Claimed || err != nil {
			t.Fatalf("Accept: %v, %v", out, err)
		}
		end := time.Now()
		settleAs(t, s, time.Now(), dedupe.Delivered, time.Second)
		// keep counts from the Update, which a loaded machine may reach well after start. The
		// check also waits past where the window would end if it were cut to whole seconds.
		at := time.Now().Add(time.Second + settle)
		if cut := end.Add(2 * time.Second).Truncate(time.Second).Add(10 * time.Millisecond); cut.After(at) {
			at = cut
		}
		sleepUntil(at)
		expectNotFound(t, "after its keep", s, id)
		out := accept(t, s, c, eventOf(id, clock()))
		digest := claim(t, s, signed(fmt.Sprint("b", n), c.Digest))
		if !time.Now().Before(start.Add(2 * time.Second)) {
			if out == dedupe.Claimed { // queued again, too late to tell: out of the next try's way
				settleAs(t, s, time.Now(), dedupe.Superseded, time.Hour)
			}
			return false
		}
		expect(t, "accept within dedupeTTL, after its keep", out, dedupe.Duplicate)
		expect(t, "its digest within dedupeTTL", digest, dedupe.Duplicate)
		sleepUntil(end.Add(2*time.Second + settle))
		expect(t, "accept after dedupeTTL", accept(t, s, c, eventOf(id, clock())), dedupe.Claimed)
		return true
	})
}

func finalStatesExpire(t *testing.T, s Store) {
	states := []dedupe.State{dedupe.Delivered, dedupe.Dead, dedupe.Superseded}
	inTime(t, "a 1 s keep holds to its end", func(n int) bool {
		now := clock()
		idOf := func(st dedupe.State) string { return fmt.Sprint(st, n) }
		stateOf := map[string]dedupe.State{}
		for _, st := range states {
			stateOf[idOf(st)] = st
			expect(t, "accept", accept(t, s, claimOf(idOf(st)), eventOf(idOf(st), now)), dedupe.Claimed)
		}
		start := alignedStart()
		for _, ev := range lease(t, s, time.Now(), 10, time.Minute) {
			ev.State = stateOf[ev.ID]
			update(t, s, ev, time.Second)
		}
		updated := time.Now() // keep counts from each Update, which a loaded machine may reach late
		at, ok := lateCheck(start, updated, time.Second)
		if !ok {
			return false
		}
		sleepUntil(at)
		var got []dedupe.State
		for _, st := range states {
			got = append(got, get(t, s, idOf(st)).State)
		}
		if !time.Now().Before(start.Add(time.Second)) {
			return false
		}
		for i, st := range states {
			if got[i] != st {
				t.Errorf("late in a 1 s keep: %s is %s", idOf(st), got[i])
			}
		}
		sleepUntil(updated.Add(time.Second + settle))
		for _, st := range states {
			expectNotFound(t, "after keep", s, idOf(st))
			expectIDs(t, "listed after keep", list(t, s, st, dedupe.Cursor{}, 10), "")
			// The dedupe window outlives the event's record.
			expect(t, "accept again after keep", accept(t, s, claimOf(idOf(st)), eventOf(idOf(st), now)), dedupe.Duplicate)
		}
		return true
	})
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
	inTime(t, "the delivered version outlives the accepted version it was delivered with", func(n int) bool {
		entity := fmt.Sprint("cus_", n)
		queue := func(id string, v int64) dedupe.Outcome {
			c, ev := versionedEvent(fmt.Sprint(id, "-", n), entity, v, clock())
			c.VersionTTL = versionTTL
			return accept(t, s, c, ev)
		}
		start := time.Now()
		expect(t, "accept version 2", queue("v2", 2), dedupe.Claimed)
		accepted := time.Now()
		settleAs(t, s, time.Now(), dedupe.Delivered, time.Hour)
		// Version 3 must be accepted while version 2 surely holds: a TTL kept to the second,
		// rounding down, ends after start+versionTTL-1s.
		sleepUntil(start.Add(1600 * time.Millisecond))
		again := time.Now()
		expect(t, "accept version 3", queue("v3", 3), dedupe.Claimed)
		late := !time.Now().Before(start.Add(versionTTL - time.Second))
		var v int64
		var ok bool
		var err error
		if !late {
			// Past version 2's VersionTTL, before version 3's.
			sleepUntil(accepted.Add(versionTTL + 50*time.Millisecond))
			v, ok, err = s.DeliveredVersion(context.Background(), ns, entity)
			late = !time.Now().Before(again.Add(versionTTL - time.Second))
		}
		if late { // version 3 is queued: out of the next try's way
			settleAs(t, s, time.Now(), dedupe.Superseded, time.Hour)
			return false
		}
		if v != 2 || !ok || err != nil {
			t.Errorf("DeliveredVersion while version 3 is still accepted: %d, %v, %v; want 2", v, ok, err)
		}
		return true
	})
}

// leaseHolds claims an ID with a 1 s lease on first, then claims it on second: InFlight late in
// the lease, Claimed once it lapsed. first and second are one store or two nodes of one.
func leaseHolds(t *testing.T, first, second Store) {
	inTime(t, "a 1 s lease holds to its end", func(n int) bool {
		c := claimOf(fmt.Sprint("a", n))
		c.Lease = time.Second
		start := alignedStart()
		expect(t, "first claim", claim(t, first, c), dedupe.Claimed)
		end := time.Now()
		at, ok := lateCheck(start, end, time.Second)
		if !ok {
			return false
		}
		sleepUntil(at)
		out := claim(t, second, c)
		if !time.Now().Before(start.Add(time.Second)) {
			return false
		}
		expect(t, "a claim late in a 1 s lease", out, dedupe.InFlight)
		sleepUntil(end.Add(time.Second + settle))
		expect(t, "a claim after the lease lapsed", claim(t, second, c), dedupe.Claimed)
		return true
	})
}
