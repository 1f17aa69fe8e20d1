package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Accept implements dedupe.Outbox in one script: the dedupe keys, the entity's version, each
// destination's backlog bound and the event itself are checked, all of them before the first
// write, and written atomically, and Redis has answered the write when it returns nil. The
// event is stored as given except that it starts Pending with no attempts, in the queue of each
// destination (c.QueuedDestinations); it is due at ev.NextAttempt if set, else at ev.AcceptedAt
// (now if zero). Queued for one destination, the event is one hash, as before routes had several;
// for several, its header and body are stored once, in the route's shared hash, and each
// destination's delivery hash holds the rest (doc.go). ev.Namespace must be "" or c.Namespace.
// c.Lease is not used. On error the Outcome is meaningless.
func (s *Store) Accept(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, dedupeTTL time.Duration) (dedupe.Outcome, error) {
	keys, args, err := s.queueCall(c, ev, dedupeTTL)
	if err != nil {
		return 0, fmt.Errorf("redisstore: accept: %w", err)
	}
	res, err := acceptScript.Run(ctx, s.perRequest, keys, args...).Text()
	if err != nil {
		return 0, fmt.Errorf("redisstore: accept: %w", err)
	}
	out, err := outcome(res)
	if err != nil {
		return 0, fmt.Errorf("redisstore: accept: %w", err)
	}
	return out, nil
}

// DoneAndQueue implements dedupe.Outbox in one script (lua/doneandqueue.lua): what Done writes
// for c (its dedupe keys done for ttl, which ends the claim, and the entity's version advanced if
// c.Version is newer), and ev queued as Accept queues it for each of c.Destinations, which must
// be given, written atomically; Redis has answered the write when it returns nil. Nothing is
// checked that could refuse the event: no destination's bound, no dedupe record (Done marks the
// ID done even if the claim lapsed and another request took it over). A destination whose queue
// still holds a delivery of ev.ID, in any state, keeps it untouched, and the others get the new
// one; the header and body of the new one are then shared by the destinations that get it only
// if no earlier event of the ID shares its own still, else each of them holds a copy. Run again
// by go-redis after a lost reply, the call finds the event its first run queued (its token) and
// returns nil without writing. At maxmemory (noeviction) it is refused whole, with an error.
func (s *Store) DoneAndQueue(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) error {
	if len(c.Destinations) == 0 {
		return errors.New("redisstore: done and queue: no destination to queue the event for")
	}
	keys, args, err := s.queueCall(c, ev, ttl)
	if err != nil {
		return fmt.Errorf("redisstore: done and queue: %w", err)
	}
	res, err := doneAndQueueScript.Run(ctx, s.perRequest, keys, args...).Text()
	if err != nil {
		return fmt.Errorf("redisstore: done and queue: %w", err)
	}
	if res != "ok" {
		return fmt.Errorf("redisstore: done and queue: unexpected reply %q from the script", res)
	}
	return nil
}

// queueCall checks a call that queues ev, claimed by c (Accept, DoneAndQueue), and returns the
// keys and arguments of its script (acceptCall), as a call of its own token, now.
func (s *Store) queueCall(c dedupe.Claim, ev *dedupe.Event, dedupeTTL time.Duration) (keys []string, args []any, err error) {
	switch {
	case ev == nil:
		return nil, nil, errors.New("nil event")
	case ev.Namespace != "" && ev.Namespace != c.Namespace:
		return nil, nil, fmt.Errorf("event namespace %q differs from the claim's %q", ev.Namespace, c.Namespace)
	case c.ID != "" && dedupeTTL <= 0:
		return nil, nil, fmt.Errorf("dedupe ttl must be positive, got %v", dedupeTTL)
	case ev.ID == "":
		return nil, nil, errors.New("empty event ID")
	}
	destinations, err := c.QueuedDestinations()
	if err != nil {
		return nil, nil, err
	}
	for _, d := range destinations {
		if len(d.OrderKey) > dedupe.MaxOrderKey {
			return nil, nil, fmt.Errorf("destination %q: order key of %d bytes, at most %d", d.Name, len(d.OrderKey), dedupe.MaxOrderKey)
		}
	}
	t, err := s.tag(c.Namespace)
	if err != nil {
		return nil, nil, err
	}
	if size := storedSize(ev); size > dedupe.MaxPayload {
		return nil, nil, fmt.Errorf("%w: %d bytes stored, at most %d", dedupe.ErrTooLarge, size, dedupe.MaxPayload)
	}
	keys, args = acceptCall(t, c, destinations, ev, dedupeTTL, rand.Text(), time.Now())
	return keys, args, nil
}

// acceptCall is the keys and arguments of the scripts that queue ev, claimed by c, for
// destinations (checked), as the call of the given token, at now: accept and doneandqueue (lua/;
// queueArgs in lua/common.lua reads them).
func acceptCall(t string, c dedupe.Claim, destinations []dedupe.Destination, ev *dedupe.Event, dedupeTTL time.Duration, token string, now time.Time) (keys []string, args []any) {
	accepted, next, updated := dedupe.AcceptTimes(ev, now)
	ids := dedupeKeys(c)
	args = []any{ev.ID, millis(dedupeTTL), c.Entity, strconv.FormatInt(c.Version, 10), millis(c.VersionTTL),
		micros(next), listMember(accepted, ev.ID), token, strconv.Itoa(len(ids))}
	args = append(args, ids...)
	args = append(args, strconv.Itoa(len(destinations)))
	// The shared body's key is declared even for one destination: Accept reads it, to find an
	// earlier event of the ID whose other destinations still hold it.
	keys = append(claimKeys(t, c), t+"p:"+ev.ID)
	ordered := false
	for _, d := range destinations {
		qp := queuePrefix(d.Name)
		args = append(args, qp, strconv.Itoa(max(d.MaxPending, 0)), d.OrderKey)
		q := t + qp
		keys = append(keys, q+"e:"+ev.ID, q+"q", q+"x")
		if d.OrderKey != "" {
			keys = append(keys, q+"k:"+d.OrderKey, q+"K")
			ordered = true
		}
		if c.Entity != "" {
			keys = append(keys, q+"w:"+c.Entity)
		}
		for _, state := range []dedupe.State{dedupe.Pending, dedupe.Delivered, dedupe.Dead, dedupe.Superseded} {
			keys = append(keys, q+"s:"+string(state))
		}
	}
	if ordered {
		keys = append(keys, t+"n") // the route's sequence
	}
	if len(destinations) == 1 {
		fields := acceptFields(ev, accepted, next, updated)
		args = append(append(args, strconv.Itoa(len(fields))), fields...)
		return keys, args
	}
	fields := deliveryFields(ev, accepted, next, updated)
	args = append(append(args, strconv.Itoa(len(fields))), fields...)
	return keys, append(args, sharedFields(ev, destinations)...)
}

// Update implements dedupe.Outbox in one script. It stores ev's delivery state (State,
// Attempts, NextAttempt, LastStatus, LastError, UpdatedAt — now if zero) in its queue
// (ev.Namespace); the request fields and AcceptedAt are fixed at Accept, and the event's
// deliveries to its other destinations are their own. A Pending event with a zero NextAttempt
// is due now. Only the holder of the latest lease updates, and only a Pending event:
// ErrNotFound if the event is absent or expired, ErrLeaseLost if it was leased again since ev
// was, an error in words if it is already final, unless it holds exactly ev's outcome (the same
// call run again by go-redis after a lost reply): that is nil. Whatever the new state, it frees
// the event's entity in the queue if this event held it (see Lease). A Delivered or Superseded
// delivery no longer has a header and body; final ones expire after keep, which must then be
// positive. An event queued for several destinations keeps its header and body (shared by its
// deliveries) while one of its deliveries is Pending or Dead: from each final Update of one,
// recomputed from the states of all of them, for good, until the latest expiry of the Dead
// ones, or no longer.
func (s *Store) Update(ctx context.Context, ev *dedupe.Event, keep time.Duration) error {
	switch {
	case ev == nil:
		return errors.New("redisstore: update: nil event")
	case ev.State != dedupe.Pending && ev.State != dedupe.Delivered && ev.State != dedupe.Dead && ev.State != dedupe.Superseded:
		return fmt.Errorf("redisstore: update: unknown state %q", ev.State)
	case ev.State != dedupe.Pending && keep <= 0:
		return fmt.Errorf("redisstore: update: keep must be positive, got %v", keep)
	case ev.ID == "":
		return errors.New("redisstore: update: empty event ID")
	}
	t, q, err := s.queue(ev.Namespace)
	if err != nil {
		return fmt.Errorf("redisstore: update: %w", err)
	}
	now := time.Now()
	updated, next := ev.UpdatedAt, ev.NextAttempt
	if updated.IsZero() {
		updated = now
	}
	if next.IsZero() {
		next = now
	}
	if ev.State != dedupe.Pending {
		next = now // when the next event of an ordered event's key is due
	}
	hold := "0"
	if ev.State == dedupe.Dead && ev.OnDead == dedupe.Hold {
		hold = "1"
	}
	args := []any{ev.ID, string(ev.State), strconv.FormatUint(ev.LeaseToken, 10), millis(keep), micros(next), hold,
		fieldState, string(ev.State), fieldAttempts, strconv.Itoa(ev.Attempts), fieldLastStatus, strconv.Itoa(ev.LastStatus),
		fieldLastError, ev.LastError, fieldUpdated, nanos(updated)}
	if ev.State == dedupe.Pending {
		args = append(args, fieldNext, nanos(next))
	}
	keys := append(scriptKeys(q, "e:"+ev.ID, "q", "x", "s:"+string(dedupe.Pending), "s:"+string(dedupe.Delivered),
		"s:"+string(dedupe.Dead), "s:"+string(dedupe.Superseded)), t+"p:"+ev.ID)
	if ev.Entity != "" {
		keys = append(keys, q+"o:"+ev.Entity, q+"b:"+ev.Entity, q+"L", t+"v:"+ev.Entity, q+"w:"+ev.Entity)
	}
	if ev.OrderKey != "" {
		keys = append(keys, q+"k:"+ev.OrderKey, q+"K", q+"H")
	}
	res, err := updateScript.Run(ctx, s.perRequest, keys, args...).StringSlice()
	if err != nil {
		return fmt.Errorf("redisstore: update: %w", err)
	}
	res = append(res, "", "") // the script's reply is one or two strings
	switch res[0] {
	case "ok":
		return nil
	case "not-found":
		return fmt.Errorf("redisstore: update: %q: %w", ev.ID, dedupe.ErrNotFound)
	case "lease-lost":
		return fmt.Errorf("redisstore: update: event %q, lease %d of %s: %w", ev.ID, ev.LeaseToken, res[1], dedupe.ErrLeaseLost)
	case "final":
		return fmt.Errorf("redisstore: update: event %q is already %s", ev.ID, res[1])
	}
	return fmt.Errorf("redisstore: update: unexpected reply %q from the script", res)
}

// Replay implements dedupe.Outbox in one script, in the queue of namespace only. The event keeps
// its LastStatus and LastError as a record of why it died, until the next attempt replaces them,
// and its body and header (kept for good again when shared by several destinations).
// The replay keeps a token of this call in the event's hash: run again by go-redis after a lost
// reply, the call answers nil as its first run did, rather than dedupe.ErrNotDead.
func (s *Store) Replay(ctx context.Context, namespace, id string, now time.Time) error {
	t, q, err := s.queue(namespace)
	if err != nil {
		return fmt.Errorf("redisstore: replay: %w", err)
	}
	if id == "" {
		return errors.New("redisstore: replay: empty event ID")
	}
	keys := append(scriptKeys(q, "e:"+id, "q", "x", "s:"+string(dedupe.Pending), "s:"+string(dedupe.Dead), "K", "H"), t+"p:"+id, t+"n")
	res, err := replayScript.Run(ctx, s.client, keys, id, nanos(now), micros(now), rand.Text()).StringSlice()
	if err != nil {
		return fmt.Errorf("redisstore: replay: %w", err)
	}
	res = append(res, "", "") // the script's reply is one or two strings
	switch res[0] {
	case "ok":
		return nil
	case "not-found":
		return fmt.Errorf("redisstore: replay: %q: %w", id, dedupe.ErrNotFound)
	case "not-dead":
		return fmt.Errorf("redisstore: replay: event %q is %s: %w", id, res[1], dedupe.ErrNotDead)
	}
	return fmt.Errorf("redisstore: replay: unexpected reply %q from the script", res)
}
