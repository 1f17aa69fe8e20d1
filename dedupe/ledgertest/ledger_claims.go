package ledgertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookgate/hookgate/dedupe"
)

// claimChecks are the promises of Claim and Release (dedupe/ledger.go).
var claimChecks = []check{
	{name: "claim/a new ID is Claimed", run: func(t *testing.T, s Store) {
		expect(t, "first claim", claim(t, s, claimOf("a")), dedupe.Claimed)
	}},
	{name: "claim/second claim of an ID in flight is InFlight", run: func(t *testing.T, s Store) {
		expect(t, "first claim", claim(t, s, claimOf("a")), dedupe.Claimed)
		expect(t, "second claim", claim(t, s, claimOf("a")), dedupe.InFlight)
	}},
	{name: "claim/an ID done is Duplicate", run: func(t *testing.T, s Store) {
		c := claimOf("a")
		expect(t, "first claim", claim(t, s, c), dedupe.Claimed)
		done(t, s, c, dedupeTTL)
		expect(t, "claim after Done", claim(t, s, c), dedupe.Duplicate)
	}},
	{name: "claim/an entity's older or equal version is Stale and holds nothing", run: claimStale},
	{name: "claim/a newer version of the entity is Claimed", run: func(t *testing.T, s Store) {
		done(t, s, versioned("v2", "cus_1", 2), dedupeTTL)
		expect(t, "version 3 after 2", claim(t, s, versioned("v3", "cus_1", 3)), dedupe.Claimed)
	}},
	{name: "claim/entities and namespaces are independent", run: claimIndependent},
	{name: "claim/a digest done is Duplicate under a fresh ID", run: func(t *testing.T, s Store) {
		first := signed("delivery-1", "body-A")
		expect(t, "first", claim(t, s, first), dedupe.Claimed)
		done(t, s, first, dedupeTTL)
		expect(t, "the same bytes under a fresh ID", claim(t, s, signed("delivery-2", "body-A")), dedupe.Duplicate)
		expect(t, "the same ID with other bytes", claim(t, s, signed("delivery-1", "body-B")), dedupe.Duplicate)
		expect(t, "a new event", claim(t, s, signed("delivery-3", "body-C")), dedupe.Claimed)
	}},
	{name: "claim/a digest in flight is InFlight under a fresh ID", run: func(t *testing.T, s Store) {
		expect(t, "first", claim(t, s, signed("delivery-1", "body-A")), dedupe.Claimed)
		expect(t, "the same bytes under a fresh ID", claim(t, s, signed("delivery-2", "body-A")), dedupe.InFlight)
		// The refused claim held nothing: its own ID is free.
		expect(t, "the refused claim's ID", claim(t, s, claimOf("delivery-2")), dedupe.Claimed)
	}},
	{name: "claim/with ID \"\" only the version is checked and nothing is held", run: claimWithoutID},
	{name: "claim/of 50 concurrent claims of one ID exactly one is Claimed", run: func(t *testing.T, s Store) {
		var got tally
		race(50, func(int) {
			out, err := s.Claim(context.Background(), claimOf("hot"))
			if err != nil {
				t.Error(err)
				return
			}
			got.add(out)
		})
		got.expect(t, "50 concurrent claims", map[dedupe.Outcome]int{dedupe.Claimed: 1, dedupe.InFlight: 49})
	}},
	{name: "claim/a claim of an ID without a lease is an error", run: func(t *testing.T, s Store) {
		c := claimOf("a")
		c.Lease = 0
		if out, err := s.Claim(context.Background(), c); err == nil {
			t.Errorf("Claim with a zero lease: %v, no error", out)
		}
	}},
	{name: "release/the provider's retry of a released ID is processed again", run: func(t *testing.T, s Store) {
		c := claimOf("a")
		expect(t, "first claim", claim(t, s, c), dedupe.Claimed)
		release(t, s, c)
		expect(t, "the retry", claim(t, s, c), dedupe.Claimed)
	}},
	{name: "release/a released digest is free again", run: func(t *testing.T, s Store) {
		c := signed("delivery-1", "body-A")
		expect(t, "first claim", claim(t, s, c), dedupe.Claimed)
		release(t, s, c)
		expect(t, "the same bytes under a fresh ID", claim(t, s, signed("delivery-2", "body-A")), dedupe.Claimed)
	}},
	{name: "release/never removes a done record", run: func(t *testing.T, s Store) {
		c := signed("a", "body-A")
		expect(t, "first claim", claim(t, s, c), dedupe.Claimed)
		done(t, s, c, dedupeTTL)
		release(t, s, c)
		expect(t, "claim after Release of a done ID", claim(t, s, c), dedupe.Duplicate)
		expect(t, "its digest under a fresh ID", claim(t, s, signed("b", "body-A")), dedupe.Duplicate)
	}},
}

// signed is a claim of a request whose signature does not cover its ID, deduplicated by the
// digest of its signed bytes too.
func signed(id, digest string) dedupe.Claim {
	c := claimOf(id)
	c.Digest = digest
	return c
}

func claimStale(t *testing.T, s Store) {
	done(t, s, versioned("v5", "cus_1", 5), dedupeTTL)
	expect(t, "older version", claim(t, s, versioned("v4", "cus_1", 4)), dedupe.Stale)
	expect(t, "equal version", claim(t, s, versioned("v5b", "cus_1", 5)), dedupe.Stale)
	// Nothing was held: the stale IDs are free, as with a newer version.
	expect(t, "a stale claim's ID", claim(t, s, claimOf("v4")), dedupe.Claimed)
	expect(t, "a stale claim's ID, newer version", claim(t, s, versioned("v5b", "cus_1", 6)), dedupe.Claimed)
}

func claimIndependent(t *testing.T, s Store) {
	done(t, s, versioned("a", "cus_1", 5), dedupeTTL)
	expect(t, "another entity's older version", claim(t, s, versioned("b", "cus_2", 1)), dedupe.Claimed)
	other := func(c dedupe.Claim) dedupe.Claim { c.Namespace = "other-route"; return c }
	expect(t, "the done ID in another namespace", claim(t, s, other(claimOf("a"))), dedupe.Claimed)
	expect(t, "the in-flight ID in another namespace", claim(t, s, other(claimOf("b"))), dedupe.Claimed)
	expect(t, "the entity's older version in another namespace", claim(t, s, other(versioned("c", "cus_1", 1))), dedupe.Claimed)
	expect(t, "the done ID in its own namespace", claim(t, s, claimOf("a")), dedupe.Duplicate)
}

func claimWithoutID(t *testing.T, s Store) {
	c := dedupe.Claim{Namespace: ns, Entity: "cus_1", Version: 3}
	expect(t, "first", claim(t, s, c), dedupe.Claimed)
	expect(t, "the same version before Done (nothing held)", claim(t, s, c), dedupe.Claimed)
	done(t, s, c, 0)
	expect(t, "the same version after Done", claim(t, s, c), dedupe.Stale)
	c.Version = 4
	expect(t, "a newer version", claim(t, s, c), dedupe.Claimed)
	c.Entity = ""
	expect(t, "no ID, no entity", claim(t, s, c), dedupe.Claimed)
}

// doneChecks are the promises of Done that need no waiting.
var doneChecks = []check{
	{name: "done/advances the entity's version, never backwards", run: func(t *testing.T, s Store) {
		done(t, s, versioned("v7", "cus_1", 7), dedupeTTL)
		done(t, s, versioned("v6", "cus_1", 6), dedupeTTL) // a late Done of an older version
		expect(t, "version 7 after a late Done of 6", claim(t, s, versioned("x", "cus_1", 7)), dedupe.Stale)
		expect(t, "version 8", claim(t, s, versioned("y", "cus_1", 8)), dedupe.Claimed)
	}},
	{name: "done/of concurrent Dones the greatest version stays", run: func(t *testing.T, s Store) {
		const n = 20
		race(n, func(i int) {
			c := versioned(fmt.Sprint("v", i+1), "cus_1", int64(i+1))
			if err := s.Done(context.Background(), c, dedupeTTL); err != nil {
				t.Error(err)
			}
		})
		expect(t, fmt.Sprint("version ", n), claim(t, s, versioned("x", "cus_1", n)), dedupe.Stale)
		expect(t, fmt.Sprint("version ", n+1), claim(t, s, versioned("y", "cus_1", n+1)), dedupe.Claimed)
	}},
	{name: "done/the version advanced by Done makes Accept's older events Stale", run: func(t *testing.T, s Store) {
		done(t, s, versioned("v2", "cus_1", 2), dedupeTTL)
		c, ev := versionedEvent("v1", "cus_1", 1, clock())
		expect(t, "accept of version 1", accept(t, s, c, ev), dedupe.Stale)
	}},
	{name: "done/also marks the digest done", run: func(t *testing.T, s Store) {
		done(t, s, signed("a", "body-A"), dedupeTTL)
		expect(t, "the same bytes under a fresh ID", claim(t, s, signed("b", "body-A")), dedupe.Duplicate)
	}},
}
