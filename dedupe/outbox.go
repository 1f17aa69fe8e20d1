package dedupe

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// State is where a queued event is in its delivery.
type State string

// The states of a queued event. Pending is the only one that is delivered; the others are final
// and kept for a retention period so "did it arrive?" can be answered.
const (
	Pending    State = "pending"
	Delivered  State = "delivered"
	Dead       State = "dead"
	Superseded State = "superseded"
)

// ErrNotFound is returned for an event the outbox does not hold (never accepted, or expired).
var ErrNotFound = errors.New("event not found")

// ErrNotDead is returned by Replay for an event that is not a dead letter: it is still pending,
// or was delivered or superseded, so there is nothing to replay.
var ErrNotDead = errors.New("event is not dead")

// ErrNoRoom is returned by an Outbox that, for want of disk space, refuses a write that would
// store an event's body again: an Update to Dead (a dead letter keeps its body for replay) or a
// Replay. The event is left as it was; the deliverer keeps it pending and tries again later.
var ErrNoRoom = errors.New("no room on the ledger's disk to keep the event's body")

// MaxPayload is the largest event an Outbox queues, in bytes: its body plus its method, URI,
// headers and metadata as stored (headers as JSON). Accept refuses a bigger event with
// ErrTooLarge. It is the size of a Badger value-log file, the largest value Badger stores
// (badgerstore); the Redis store keeps the same bound.
const MaxPayload = 8 << 20

// ErrTooLarge is returned by Accept for an event larger than MaxPayload.
var ErrTooLarge = errors.New("event too large to queue")

// ErrLeaseLost is returned by Update to a lease holder whose lease lapsed and was handed out
// again since: the newer holder's outcome is the one that counts, and this one is dropped.
var ErrLeaseLost = errors.New("lease lost: the event was leased again since")

// Event is one accepted webhook, queued for delivery to the upstream exactly as it arrived.
type Event struct {
	Namespace string      `json:"namespace"`
	ID        string      `json:"id"`
	Entity    string      `json:"entity,omitempty"`
	Version   int64       `json:"version,omitempty"`
	Method    string      `json:"method"`
	URI       string      `json:"uri"`    // path and query as received
	Header    http.Header `json:"header"` // nil once Delivered or Superseded, as Body
	Body      []byte      `json:"body"`   // nil once Delivered or Superseded: the body is not kept
	BodyBytes int         `json:"body_bytes"`
	Scheme    string      `json:"scheme"` // sent as Hookgate-Verified

	State       State     `json:"state"`
	Attempts    int       `json:"attempts"`
	NextAttempt time.Time `json:"next_attempt,omitzero"` // when Pending: when it is due
	LastStatus  int       `json:"last_status,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	AcceptedAt  time.Time `json:"accepted_at"`
	UpdatedAt   time.Time `json:"updated_at"`

	// LeaseToken is the number of the lease that handed the event out (0: never leased); Update
	// must be given it back, so a holder whose lease lapsed cannot overwrite a newer holder's.
	LeaseToken uint64 `json:"-"`

	// OrderKey is the event's key in its queue's order (Destination.OrderKey), "" when the queue
	// delivers it unordered. Seq is its place in that order: the route's sequence, assigned in
	// the write that accepted it, the same in each of its queues.
	OrderKey string `json:"order_key,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
	// Holds is set on a dead letter that holds its key: the events behind it wait (OnDead Hold).
	Holds bool `json:"holds,omitempty"`
	// OnDead is what an Update to Dead does to the events behind an ordered event: Hold (the
	// zero value) or Skip. Read by Update only.
	OnDead OnDead `json:"-"`
}

// OnDead is what becomes of the events behind an ordered event that died.
type OnDead uint8

const (
	// Hold keeps them waiting, the key held, until the dead head is replayed or skipped.
	Hold OnDead = iota
	// Skip lets the next one go: the dead letter stays, replayable at the key's tail.
	Skip
)

// ErrNotHeld is returned by Orderer.Skip for a dead letter that holds no key.
var ErrNotHeld = errors.New("event does not hold its key")

// HeldKey is one key of an ordered queue held by its dead head.
type HeldKey struct {
	Key     string    `json:"key"`
	Head    string    `json:"head"`    // the dead letter's event ID
	Since   time.Time `json:"since"`   // when it died
	Waiting int       `json:"waiting"` // the events behind it
}

// Orderer is what an Outbox offers of its ordered queues (Destination.OrderKey): an event of a
// key is leased only while it is its key's head, the lowest Seq among the queue's events of the
// key that are Pending, or Dead and holding it; so a key's events reach the upstream one at a
// time, in the order the ledger accepted them, and a retrying head holds back its key alone.
type Orderer interface {
	// HeldKeys lists up to limit keys of namespace held by a dead head, in key order, after
	// afterKey.
	HeldKeys(ctx context.Context, namespace, afterKey string, limit int) ([]HeldKey, error)
	// CountHeld is the number of keys of namespace held by a dead head.
	CountHeld(ctx context.Context, namespace string) (int, error)
	// Skip releases the key a dead head holds: the event stays a dead letter, kept for keep from
	// now, and the next of its key is due at now. ErrNotFound if absent, ErrNotHeld if it holds
	// no key.
	Skip(ctx context.Context, namespace, id string, now time.Time, keep time.Duration) error
}

// Cursor is where a listing resumes: after the event with this accept time and ID, the last
// one of the previous page. Listings sort by accept time, then ID.
type Cursor struct {
	AcceptedAt time.Time
	ID         string
}

// After is the cursor that resumes a listing after ev.
func (ev *Event) After() Cursor { return Cursor{AcceptedAt: ev.AcceptedAt, ID: ev.ID} }

// AcceptTimes is when ev, as given to Accept, was accepted, is first due and was last updated:
// its own AcceptedAt, NextAttempt and UpdatedAt, where each that is zero defaults to now, the
// accept time and the accept time, as every store's Accept stores them.
func AcceptTimes(ev *Event, now time.Time) (accepted, due, updated time.Time) {
	accepted, due, updated = ev.AcceptedAt, ev.NextAttempt, ev.UpdatedAt
	if accepted.IsZero() {
		accepted = now
	}
	if due.IsZero() {
		due = accepted
	}
	if updated.IsZero() {
		updated = accepted
	}
	return accepted, due, updated
}

// Outbox is the durable queue behind async mode. Implementations must make Accept atomic and
// durable: an event is acknowledged to the provider only after Accept returns nil.
type Outbox interface {
	// Accept, in one transaction synced to disk before it returns: c.ID (or c.Digest) already
	// done, or queued in any state → Duplicate; c.ID (or c.Digest) claimed with a live lease →
	// InFlight; c.Entity set and
	// c.Version <= the entity's accepted version → Stale; a destination it is queued for
	// (Claim.QueuedDestinations) with a MaxPending > 0 whose queue already holds that many
	// Pending events → Full; otherwise it marks c.ID and c.Digest done for dedupeTTL (skipped
	// when c.ID is ""), advances the entity's accepted version, stores ev once and queues it as
	// Pending, due at ev.AcceptedAt, in every destination's queue, and returns Claimed. ev.ID is
	// the key (set even when c.ID is ""). ev.Namespace is "" or c.Namespace, the route. ev (its
	// Body too) is read, and may be read after a call given up on its context returns (a Redis
	// client still sends a call it queued): the caller must not write it afterwards.
	//
	// Each destination's delivery is its own from then on: the queue methods below take a
	// queue's namespace (QueueNamespace), and an Update in one queue never changes another. The
	// event's body is kept while any destination's delivery is Pending or Dead.
	Accept(ctx context.Context, c Claim, ev *Event, dedupeTTL time.Duration) (Outcome, error)
	// Lease hands out up to n Pending events of namespace due at or before now, earliest first,
	// and moves each one's due time to now+lease so nobody else gets it meanwhile (the events
	// handed out carry it as NextAttempt: the end of their lease). If the process dies, they
	// come due again after the lease: delivery is at-least-once. Each event handed out carries
	// a new LeaseToken, which fences off the holders of its earlier leases (see Update). A
	// call's work is bounded, so it may hand out fewer than n while more are due; the next call
	// goes on. A store shared by several processes (gateway nodes) must not hand an entity's
	// events to one caller while another holds an unlapsed lease on an event of that entity, so
	// they reach the upstream in order across nodes; within one process the deliverer keeps
	// them in order (deliver/loop.go).
	Lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*Event, error)
	// Update stores ev after an attempt: Pending (with NextAttempt), Delivered, Dead or
	// Superseded. Delivered also advances the entity's delivered version. Final states expire
	// after keep. Synced before it returns. ev.LeaseToken must be the token of the event's
	// latest lease: a holder whose lease lapsed and was handed out again gets ErrLeaseLost and
	// nothing is written. A holder whose lease lapsed without being handed out again still
	// holds the latest one, and its outcome is stored.
	Update(ctx context.Context, ev *Event, keep time.Duration) error
	// DeliveredVersion is the newest version delivered for the entity, and whether there is one.
	// The delivered version expires with the entity's accepted version (Claim.VersionTTL).
	DeliveredVersion(ctx context.Context, namespace, entity string) (int64, bool, error)
	// Get returns one event, or ErrNotFound.
	Get(ctx context.Context, namespace, id string) (*Event, error)
	// List returns up to limit events of namespace in state, oldest accepted first, starting
	// after the cursor (the zero Cursor starts at the oldest). It leaves out their headers and
	// bodies (BodyBytes stays), so a listing costs memory by the event, not by the body; Get
	// has them.
	List(ctx context.Context, namespace string, state State, after Cursor, limit int) ([]*Event, error)
	// Replay makes a Dead event Pending again, due at now, with its attempts reset. ErrNotFound
	// if absent; ErrNotDead if it is in another state.
	Replay(ctx context.Context, namespace, id string, now time.Time) error
	// DoneAndQueue settles a sync-mode claim whose event the app took and queues the event for
	// the route's copy destinations, in one transaction synced to disk before it returns: it does
	// what Ledger.Done does for c (marks c.ID and c.Digest done for ttl, advances the entity's
	// version, ends the claim), and queues ev as Accept does for each of c.Destinations, which
	// must be given. It never refuses an event: the app already took it, so a destination's
	// MaxPending is not applied, and a destination that still holds a live delivery of ev.ID
	// (an ID reused after its dedupe window) keeps that one. ev.Namespace is "" or c.Namespace.
	DoneAndQueue(ctx context.Context, c Claim, ev *Event, ttl time.Duration) error
}

// StartLimiter is implemented by an Outbox that keeps a route's delivery rate limit where every
// process sharing the store sees it (Redis), so the gateway nodes together start at most one
// attempt per interval; the deliverer keeps the limit in memory for an Outbox that does not.
type StartLimiter interface {
	// TakeStart reserves the namespace's next start, one per interval at most across every
	// caller, atomically: at the later of now and the last start reserved plus interval, if that
	// is at most ahead from now. It returns how long from now the start is, so a wait of at most
	// ahead is a start taken; a longer one is how long until the next may be free, none taken.
	TakeStart(ctx context.Context, namespace string, interval, ahead time.Duration) (wait time.Duration, err error)
}
