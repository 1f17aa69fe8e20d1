package badgerstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// This file holds the Outbox's writes other than Lease: Accept, Update and
// Replay. Every one is applied atomically, on its own, by update (in a group
// commit shared with concurrent writes, see commit.go) and is synced before
// it returns. The key layout is described in outbox_keys.go.

var _ dedupe.Outbox = (*Store)(nil)

// Accept implements dedupe.Outbox. The event is stored as given except that it
// starts Pending with no attempts; it is due at ev.NextAttempt if set, else
// at ev.AcceptedAt (which is set to now if zero). ev.Namespace must be "" or
// c.Namespace, and ev is not modified. c.Lease is not used. On error the
// Outcome is meaningless.
func (b *Store) Accept(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, dedupeTTL time.Duration) (dedupe.Outcome, error) {
	queues, dests, err := acceptKeys(c, ev, dedupeTTL)
	if err != nil {
		return 0, fmt.Errorf("dedupe: accept: %w", err)
	}
	ids, vk, err := keys(c)
	if err != nil {
		return 0, fmt.Errorf("dedupe: accept: %w", err)
	}
	p := payloadOf(ev)
	p.Destinations = storedDestinations(queues)
	pay := p.encode()
	if len(pay) > dedupe.MaxPayload {
		return 0, fmt.Errorf("dedupe: accept: %w: %d bytes stored, at most %d", dedupe.ErrTooLarge, len(pay), dedupe.MaxPayload)
	}
	acceptedAt, due, updatedAt := dedupe.AcceptTimes(ev, b.clock())

	var out dedupe.Outcome
	err = b.write(ctx, "accept", b.declare(ids, vk), func(txn *badger.Txn) error {
		now := b.clock()
		var err error
		if b.claims.heldAny(ids, now) {
			out = dedupe.InFlight
			return nil
		}
		if out, err = idOutcome(txn, ids, now); err != nil || out != dedupe.Claimed {
			return err
		}
		// The ID still queued anywhere, for these destinations or others, is a duplicate:
		// its stored request serves those deliveries.
		if held, err := liveOwners(txn, queues[0], now); err != nil || len(held) > 0 {
			out = dedupe.Duplicate
			return err
		}
		// An expired record of a reused ID whose Badger TTL has not yet dropped it: store
		// removes its index entries.
		var olds [maxInlineQueues]*outboxRecord
		old := olds[:0]
		for _, q := range queues {
			rec, live, err := getRecord(txn, q.record, now)
			if err != nil {
				return err
			}
			if live {
				out = dedupe.Duplicate
				return nil
			}
			old = append(old, rec)
		}
		if out, err = versionOutcome(txn, vk, c.Version); err != nil || out != dedupe.Claimed {
			return err
		}
		for i, q := range queues {
			if dests[i].MaxPending > 0 && b.pending.count(txn, q.ns) >= dests[i].MaxPending {
				out = dedupe.Full
				return nil
			}
		}
		if vk != nil {
			if err := advanceAccepted(txn, c, vk, queues); err != nil {
				return err
			}
		}
		if err := markDone(txn, ids, now.Add(dedupeTTL)); err != nil {
			return err
		}
		if err := txn.Set(queues[0].payload, pay); err != nil {
			return err
		}
		seq, err := routeSequence(txn, c.Namespace, dests)
		if err != nil {
			return err
		}
		for i, q := range queues {
			// A lease of an earlier event under this ID, expired, is not this one's.
			b.leases.drop(q.ns, q.id)
			// Made here, not captured, the record stays on the committer's stack.
			rec := outboxRecord{State: dedupe.Pending, AcceptedAt: acceptedAt, NextAttempt: due, UpdatedAt: updatedAt}
			if key := dests[i].OrderKey; key != "" {
				if err := joinKey(txn, q, &rec, key, seq); err != nil {
					return err
				}
			}
			if err := b.store(txn, q, old[i], &rec, time.Time{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return out, nil
}

// maxInlineQueues is how many destinations' records Accept reads without allocating.
const maxInlineQueues = 4

// acceptKeys checks Accept's arguments and returns the event's keys in each destination's
// queue, with the destinations they are for.
func acceptKeys(c dedupe.Claim, ev *dedupe.Event, dedupeTTL time.Duration) ([]outboxKeys, []dedupe.Destination, error) {
	switch {
	case ev == nil:
		return nil, nil, fmt.Errorf("nil event")
	case ev.Namespace != "" && ev.Namespace != c.Namespace:
		return nil, nil, fmt.Errorf("event namespace %q differs from the claim's %q", ev.Namespace, c.Namespace)
	case c.ID != "" && dedupeTTL <= 0:
		return nil, nil, fmt.Errorf("dedupe ttl must be positive, got %v", dedupeTTL)
	case routeOf(c.Namespace) != c.Namespace:
		return nil, nil, fmt.Errorf("namespace %q is a queue's, not a route's", c.Namespace)
	}
	dests, err := c.QueuedDestinations()
	if err != nil {
		return nil, nil, err
	}
	queues := make([]outboxKeys, len(dests))
	for i, d := range dests {
		if queues[i], err = keysFor(dedupe.QueueNamespace(c.Namespace, d.Name), ev.ID); err != nil {
			return nil, nil, err
		}
	}
	return queues, dests, nil
}

// Update implements dedupe.Outbox. It stores ev's delivery state (State, Attempts,
// NextAttempt, LastStatus, LastError, UpdatedAt — set to now if zero); the
// request fields and AcceptedAt are fixed at Accept and ignored here. A
// Pending event with a zero NextAttempt is due now. The entity and version
// whose delivered version a Delivered event advances are the accepted ones.
//
// Only the holder of the latest lease can update, and only a Pending event:
// ErrNotFound if the event is absent or expired, ErrLeaseLost if it was
// leased again since ev was (a worker whose lease ran out reports after
// another worker took the event over), and an error in words if it already
// reached a final state, so neither a newer holder's outcome nor a final
// state is overwritten by a late report. keep must be positive for the
// final states.
func (b *Store) Update(ctx context.Context, ev *dedupe.Event, keep time.Duration) error {
	switch {
	case ev == nil:
		return fmt.Errorf("dedupe: update: nil event")
	case !validState(ev.State):
		return fmt.Errorf("dedupe: update: unknown state %q", ev.State)
	case final(ev.State) && keep <= 0:
		return fmt.Errorf("dedupe: update: keep must be positive, got %v", keep)
	}
	ok, err := keysFor(ev.Namespace, ev.ID)
	if err != nil {
		return fmt.Errorf("dedupe: update: %w", err)
	}
	var begun bool    // the lease table let this Update through (beginUpdate)
	var due time.Time // when it reschedules the event (Pending)
	err = b.update(ctx, "update", func(txn *badger.Txn) error {
		now := b.clock()
		old, live, err := getRecord(txn, ok.record, now)
		switch {
		case err != nil:
			return err
		case !live:
			return fmt.Errorf("%q: %w", ev.ID, dedupe.ErrNotFound)
		case !begun && !b.leases.beginUpdate(ok.ns, ok.id, ev.LeaseToken, old.Leases):
			return fmt.Errorf("event %q, lease %d: %w", ev.ID, ev.LeaseToken, dedupe.ErrLeaseLost)
		}
		begun = true
		if final(old.State) {
			return fmt.Errorf("event %q is already %s", ev.ID, old.State)
		}
		// The record keeps the token, so that this holder, whose lease ends here, is the latest
		// until the event is leased again.
		rec := &outboxRecord{
			State: ev.State, Attempts: ev.Attempts, LastStatus: ev.LastStatus, LastError: ev.LastError,
			AcceptedAt: old.AcceptedAt, UpdatedAt: ev.UpdatedAt, Leases: ev.LeaseToken,
			OrderKey: old.OrderKey, Seq: old.Seq,
		}
		if rec.UpdatedAt.IsZero() {
			rec.UpdatedAt = now
		}
		if old.waiting() { // never a head: it stays behind its key's head, or leaves its key alone
			return b.updateWaiting(txn, ok, old, rec, now, keep)
		}
		if ev.State == dedupe.Pending {
			rec.NextAttempt = ev.NextAttempt
			if rec.NextAttempt.IsZero() {
				rec.NextAttempt = now
			}
			err := b.store(txn, ok, old, rec, time.Time{})
			due = rec.NextAttempt
			return err
		}
		due = time.Time{}
		expires := now.Add(keep)
		holds := rec.OrderKey != "" && ev.State == dedupe.Dead && ev.OnDead == dedupe.Hold
		var p *payload
		if holds { // a held head never expires: its expiry would release its key unseen
			expires = time.Time{}
			if err := holdKey(txn, ok, rec, now); err != nil {
				return err
			}
			p, err = retain(txn, ok.payload, expires)
		} else {
			p, err = settlePayload(txn, ok, ev.State, expires, now)
		}
		if err != nil {
			return err
		}
		if ev.State == dedupe.Delivered {
			if err := advanceDelivered(txn, ok.ns, p); err != nil {
				return err
			}
		}
		if err := b.store(txn, ok, old, rec, expires); err != nil || rec.OrderKey == "" || holds {
			return err
		}
		return b.leaveKey(txn, ok, rec, now)
	})
	if !begun {
		return err
	}
	// Scans passed over the event's due entries while it was in the lease table: they must
	// find the one this Update wrote, or the one it failed to replace.
	switch dropped := b.leases.endUpdate(ok.ns, ok.id, ev.LeaseToken, err == nil); {
	case dropped:
		b.floors.reset(ok.ns)
	case err == nil && !due.IsZero():
		b.floors.lowerAfter(ok.ns, due)
	}
	return err
}

// settlePayload rewrites the event's payload as its delivery in ok's queue reaches the final
// state, expiring at expires, and returns it (its body only if kept). A dead letter keeps its
// body for Replay; a delivered or superseded event drops it (shed). An event queued for several
// destinations keeps its body while any other destination's delivery is Pending (untouched,
// without expiry) or Dead (until the last such dead letter expires), and its payload until the
// last of its records expires: the rule is read from the records each time, never counted.
func settlePayload(txn *badger.Txn, ok outboxKeys, state dedupe.State, expires, now time.Time) (*payload, error) {
	meta, err := getPayloadMeta(txn, ok.payload)
	if err != nil {
		return nil, err
	}
	keepBody := state == dedupe.Dead
	route := routeOf(ok.ns)
	for _, name := range meta.Destinations {
		sibling := dedupe.QueueNamespace(route, name)
		if sibling == ok.ns {
			continue
		}
		sk, err := keysFor(sibling, ok.id)
		if err != nil {
			return nil, err
		}
		rec, until, live, err := getRecordUntil(txn, sk.record, now)
		switch {
		case err != nil:
			return nil, err
		case !live:
			continue
		case rec.State == dedupe.Pending, rec.State == dedupe.Dead && until.IsZero(): // a held head never expires
			return meta, nil
		case rec.State == dedupe.Dead:
			keepBody = true
		}
		if until.After(expires) {
			expires = until
		}
	}
	if keepBody {
		return retain(txn, ok.payload, expires)
	}
	return shed(txn, ok.payload, expires)
}

// advanceDelivered raises the entity's delivered version in the event's queue to the event's,
// never lowering it, expiring with the accepted version (deliveredEntry). Writes are applied one at a time, so it compares against
// the newest value.
func advanceDelivered(txn *badger.Txn, namespace string, p *payload) error {
	if p.Entity == "" {
		return nil
	}
	dk, err := key(namespace, kindDelivered, p.Entity)
	if err != nil {
		return err
	}
	stored, found, err := getVersion(txn, dk)
	if err != nil || (found && p.Version <= stored) {
		return err
	}
	e, err := deliveredEntry(txn, namespace, p.Entity, dk, p.Version)
	if err != nil || e == nil {
		return err
	}
	return txn.SetEntry(e)
}

// deadRecord reads a dead letter's record for Replay and Skip: ErrNotFound if there is none,
// ErrNotDead if the event is in another state.
func (b *Store) deadRecord(txn *badger.Txn, ok outboxKeys) (*outboxRecord, error) {
	old, live, err := getRecord(txn, ok.record, b.clock())
	switch {
	case err != nil:
		return nil, err
	case !live:
		return nil, fmt.Errorf("%q: %w", ok.id, dedupe.ErrNotFound)
	case old.State != dedupe.Dead:
		return nil, fmt.Errorf("event %q is %s: %w", ok.id, old.State, dedupe.ErrNotDead)
	}
	return old, nil
}

// Replay implements dedupe.Outbox. The event keeps its LastStatus and LastError as
// a record of why it died, until the next attempt replaces them.
func (b *Store) Replay(ctx context.Context, namespace, id string, now time.Time) error {
	ok, err := keysFor(namespace, id)
	if err != nil {
		return fmt.Errorf("dedupe: replay: %w", err)
	}
	return b.update(ctx, "replay", func(txn *badger.Txn) error {
		old, err := b.deadRecord(txn, ok)
		if err != nil {
			return err
		}
		rec := *old
		rec.State, rec.Attempts, rec.NextAttempt, rec.UpdatedAt = dedupe.Pending, 0, now, now
		b.leases.drop(ok.ns, ok.id) // a lease left by a failed commit that wrote Dead
		if err := b.replayInOrder(txn, ok, &rec); err != nil {
			return err
		}
		if _, err := retain(txn, ok.payload, time.Time{}); err != nil {
			return err
		}
		return b.store(txn, ok, old, &rec, time.Time{})
	})
}

// store writes rec (expiring at expires, zero for never) and moves the
// event's index entries from where old had them (old may be nil): a due
// entry is written while the event is Pending, a leased entry while it is
// Leased, and the state entry expires with the record.
//
// An old due entry in the future, such as the lease expiry that an earlier
// version wrote for an event just delivered, is left in place: a Lease drops
// it as stale when it comes due. Deleting it would leave a tombstone above
// where Leases stop scanning, and every Lease would then walk the tombstones
// of all the events delivered within the last lease time before finding that
// nothing is due. (Leases are held in memory now and leave an event's due
// entry where it was, due at or before the Lease, so its holder's Update
// deletes it below the floor.)
//
// A Pending event due in the past is written as due now: as the writes are serialized, no due
// entry is then ever written below where an earlier Lease stopped scanning, which is what lets
// the next Lease start there (outbox_floor.go).
func (b *Store) store(txn *badger.Txn, ok outboxKeys, old, rec *outboxRecord, expires time.Time) error {
	now := b.clock()
	if rec.State == dedupe.Pending && rec.NextAttempt.Before(now) && !rec.waiting() {
		rec.NextAttempt = now
	}
	if err := putRecord(txn, ok.record, rec, expires); err != nil {
		return err
	}
	b.pending.moved(txn, ok.ns, old, rec)
	if err := ok.setLeased(txn, old != nil && old.Leased, rec.Leased); err != nil {
		return err
	}
	var oldDue, oldState []byte
	if old != nil {
		if old.State == dedupe.Pending && !old.waiting() && !old.NextAttempt.After(now) {
			oldDue = ok.due(old.NextAttempt)
		}
		oldState = ok.state(old.State, old.AcceptedAt)
	}
	newState := ok.state(rec.State, rec.AcceptedAt)
	switch {
	case oldState == nil:
	case !bytes.Equal(oldState, newState):
		if err := txn.Delete(oldState); err != nil {
			return err
		}
	case rec.State == dedupe.Pending:
		newState = nil // a retry: the pending entry, which never expires, stays as it is
	}
	if newState != nil {
		if err := txn.SetEntry(entry(newState, nil, expires)); err != nil {
			return err
		}
	}
	if rec.State != dedupe.Pending {
		if oldDue == nil {
			return nil
		}
		return txn.Delete(oldDue)
	}
	if rec.waiting() { // behind its key's head: no due entry until it is promoted
		if oldDue == nil {
			return nil
		}
		return txn.Delete(oldDue)
	}
	newDue := ok.due(rec.NextAttempt)
	b.floors.lower(txn, ok.ns, rec.NextAttempt)
	if oldDue != nil && !bytes.Equal(oldDue, newDue) {
		if err := txn.Delete(oldDue); err != nil {
			return err
		}
	}
	return txn.Set(newDue, nil)
}
