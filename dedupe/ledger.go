// Package dedupe is the gateway's ledger of webhook deliveries: it remembers
// which event IDs were processed (within a dedupe window), leases an ID to
// exactly one in-flight request, and keeps the newest version seen per entity
// so that out-of-order deliveries can be dropped as stale.
//
// This package is the contract (Ledger, Outbox, their types and errors); the stores live beside
// it: badgerstore (embedded, the default) and redisstore (shared by several gateway nodes), both
// held to it by the checks of ledgertest.
package dedupe

import (
	"context"
	"fmt"
	"time"
)

// Outcome is what Claim found.
type Outcome int

const (
	// Claimed means the caller now holds a lease on the ID and must call Done or Release.
	Claimed Outcome = iota
	// Duplicate means the ID was already processed (done) within its TTL.
	Duplicate
	// InFlight means another request holds an unexpired claim on the ID.
	InFlight
	// Stale means the entity already has this version or a newer one.
	Stale
	// Full means the namespace's backlog of undelivered events has reached Claim.MaxPending
	// (Accept only): nothing was stored, and the provider should retry later.
	Full
)

// String returns the outcome's lower-case name, as used in logs and metrics labels.
func (o Outcome) String() string {
	switch o {
	case Claimed:
		return "claimed"
	case Duplicate:
		return "duplicate"
	case InFlight:
		return "in-flight"
	case Stale:
		return "stale"
	case Full:
		return "full"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Claim names one event for the ledger.
type Claim struct {
	// Namespace is the route's name; it prefixes every key so routes sharing a
	// store never collide. It must not contain a NUL byte.
	Namespace string
	// ID is the event ID; "" means dedupe is off for this route (only the version is checked).
	ID string
	// Digest identifies the signed bytes (a hash of them) when the signature does not cover the
	// ID, so the ID alone proves nothing: it is deduplicated alongside ID, checked and recorded
	// in the same step, and a request replayed under a fresh ID is a Duplicate. "" when the
	// signature covers the ID; ignored when ID is "".
	Digest string
	// Entity is the entity key; "" when versions are not configured.
	Entity string
	// Version is the event's version (see ParseVersion); compared only when Entity != "".
	Version int64
	// VersionTTL is how long the entity's version is kept after it last advanced (Done, Accept);
	// once it has expired, an older event of the entity is no longer known to be stale. A stale
	// answer does not refresh it. 0 keeps the version for good. Badger keeps it to the second.
	VersionTTL time.Duration
	// Lease is how long the claim holds if neither Done nor Release comes
	// (e.g. the process died). It must be positive when ID != "".
	Lease time.Duration
	// MaxPending, when positive, bounds the namespace's backlog for Accept: with that many
	// undelivered events queued, a new event is Full. (Duplicates and stale events are
	// still answered as such.) 0 means no bound. It bounds the default destination's queue, and
	// is not used when Destinations is set.
	MaxPending int
	// Destinations, for Accept, are the destinations the event is queued for, each in its own
	// queue (QueueNamespace) with its own bound, all in the write that accepts it: it is Full
	// when any of them is. nil queues it for DefaultDestination alone, bounded by MaxPending.
	Destinations []Destination
}

// Ledger records event IDs and entity versions. Implementations must make
// Claim atomic: of many concurrent Claims of one ID exactly one gets Claimed.
type Ledger interface {
	// Claim, atomically: ID (or Digest) done → Duplicate; ID (or Digest)
	// claimed with live lease → InFlight; Entity set and Version <= stored version → Stale (nothing
	// held); else holds a claim for the lease → Claimed. A claim need not be
	// durable: one lost with the process is a lapsed lease.
	Claim(ctx context.Context, c Claim) (Outcome, error)
	// Done marks the claimed ID processed for ttl (dedupe window) and advances
	// the entity's version if c.Version is greater than the stored one
	// (compare-and-advance; never moves backwards), kept for c.VersionTTL from
	// then. Durable (synced) when it returns.
	Done(ctx context.Context, c Claim, ttl time.Duration) error
	// Release drops the claim so the provider's retry of the same ID is
	// processed again. Never removes a done record.
	Release(ctx context.Context, c Claim) error
	// Close releases the store.
	Close() error
}
