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

// Accept implements dedupe.Outbox in one script: the dedupe keys, the entity's version, the
// backlog's bound and the event itself are checked and written atomically, and Redis has
// answered the write when it returns nil. The event is stored as given except that it starts
// Pending with no attempts; it is due at ev.NextAttempt if set, else at ev.AcceptedAt (now if
// zero). ev.Namespace must be "" or c.Namespace. c.Lease is not used. On error the Outcome is
// meaningless.
func (s *Store) Accept(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, dedupeTTL time.Duration) (dedupe.Outcome, error) {
	switch {
	case ev == nil:
		return 0, errors.New("redisstore: accept: nil event")
	case ev.Namespace != "" && ev.Namespace != c.Namespace:
		return 0, fmt.Errorf("redisstore: accept: event namespace %q differs from the claim's %q", ev.Namespace, c.Namespace)
	case c.ID != "" && dedupeTTL <= 0:
		return 0, fmt.Errorf("redisstore: accept: dedupe ttl must be positive, got %v", dedupeTTL)
	case ev.ID == "":
		return 0, errors.New("redisstore: accept: empty event ID")
	}
	t, err := s.tag(c.Namespace)
	if err != nil {
		return 0, fmt.Errorf("redisstore: accept: %w", err)
	}
	if size := storedSize(ev); size > dedupe.MaxPayload {
		return 0, fmt.Errorf("redisstore: accept: %w: %d bytes stored, at most %d", dedupe.ErrTooLarge, size, dedupe.MaxPayload)
	}
	accepted, next, updated := dedupe.AcceptTimes(ev, time.Now())
	ids := dedupeKeys(c)
	args := []any{ev.ID, millis(dedupeTTL), c.Entity, strconv.FormatInt(c.Version, 10), millis(c.VersionTTL),
		strconv.Itoa(max(c.MaxPending, 0)), micros(next), listMember(accepted, ev.ID), rand.Text(), strconv.Itoa(len(ids))}
	args = append(args, ids...)
	args = append(args, acceptFields(ev, accepted, next, updated)...)
	keys := append(claimKeys(t, c), t+"e:"+ev.ID, t+"q", t+"x")
	if c.Entity != "" {
		keys = append(keys, t+"w:"+c.Entity)
	}
	for _, state := range []dedupe.State{dedupe.Pending, dedupe.Delivered, dedupe.Dead, dedupe.Superseded} {
		keys = append(keys, t+"s:"+string(state))
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

// Update implements dedupe.Outbox in one script. It stores ev's delivery state (State,
// Attempts, NextAttempt, LastStatus, LastError, UpdatedAt — now if zero); the request fields and
// AcceptedAt are fixed at Accept. A Pending event with a zero NextAttempt is due now. Only the
// holder of the latest lease updates, and only a Pending event: ErrNotFound if the event is
// absent or expired, ErrLeaseLost if it was leased again since ev was, an error in words if it
// is already final, unless it holds exactly ev's outcome (the same call run again by go-redis
// after a lost reply): that is nil. Whatever the new state, it frees the event's entity if this
// event held it (see Lease). Delivered and Superseded events lose their header and body; final events expire
// after keep, which must then be positive.
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
	t, err := s.tag(ev.Namespace)
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
	args := []any{ev.ID, string(ev.State), strconv.FormatUint(ev.LeaseToken, 10), millis(keep), micros(next),
		fieldState, string(ev.State), fieldAttempts, strconv.Itoa(ev.Attempts), fieldLastStatus, strconv.Itoa(ev.LastStatus),
		fieldLastError, ev.LastError, fieldUpdated, nanos(updated)}
	if ev.State == dedupe.Pending {
		args = append(args, fieldNext, nanos(next))
	}
	keys := scriptKeys(t, "e:"+ev.ID, "q", "x", "s:"+string(dedupe.Pending), "s:"+string(dedupe.Delivered),
		"s:"+string(dedupe.Dead), "s:"+string(dedupe.Superseded))
	if ev.Entity != "" {
		keys = append(keys, t+"o:"+ev.Entity, t+"b:"+ev.Entity, t+"L", t+"v:"+ev.Entity, t+"w:"+ev.Entity)
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

// Replay implements dedupe.Outbox in one script. The event keeps its LastStatus and LastError
// as a record of why it died, until the next attempt replaces them, and its body and header.
// The replay keeps a token of this call in the event's hash: run again by go-redis after a lost
// reply, the call answers nil as its first run did, rather than dedupe.ErrNotDead.
func (s *Store) Replay(ctx context.Context, namespace, id string, now time.Time) error {
	t, err := s.tag(namespace)
	if err != nil {
		return fmt.Errorf("redisstore: replay: %w", err)
	}
	if id == "" {
		return errors.New("redisstore: replay: empty event ID")
	}
	keys := scriptKeys(t, "e:"+id, "q", "x", "s:"+string(dedupe.Pending), "s:"+string(dedupe.Dead))
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
