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

// Ordered queues (dedupe.Orderer). An event queued with an order key (dedupe.Destination) gets
// the route's next sequence number (T n) in the script that accepts it, and a member of its key's
// FIFO (Q k:<key>, by sequence); only the key's head, the FIFO's first, is in the due queue (Q q),
// so Lease, unchanged, can only ever hand out heads. The Update that ends a head (Delivered,
// Superseded, or Dead with OnDead Skip) takes it out of the FIFO and makes the next one the head,
// due then, in the same script; a Dead head under OnDead Hold stays in it, holding its key (Q H)
// without expiry, until Replay makes it Pending again or Skip releases the key (lua/common.lua).

var _ dedupe.Orderer = (*Store)(nil)

// Skip implements dedupe.Orderer in one script (lua/skip.lua). The skip keeps a token of this
// call in the event's hash: run again by go-redis after a lost reply, the call answers nil as its
// first run did, rather than dedupe.ErrNotHeld.
func (s *Store) Skip(ctx context.Context, namespace, id string, now time.Time, keep time.Duration) error {
	switch {
	case id == "":
		return errors.New("redisstore: skip: empty event ID")
	case keep <= 0:
		return fmt.Errorf("redisstore: skip: keep must be positive, got %v", keep)
	}
	t, q, err := s.queue(namespace)
	if err != nil {
		return fmt.Errorf("redisstore: skip: %w", err)
	}
	keys := append(scriptKeys(q, "e:"+id, "q", "x", "K", "H", "s:"+string(dedupe.Dead)), t+"p:"+id)
	res, err := skipScript.Run(ctx, s.client, keys, id, micros(now), millis(keep), rand.Text()).StringSlice()
	if err != nil {
		return fmt.Errorf("redisstore: skip: %w", err)
	}
	res = append(res, "")
	switch res[0] {
	case "ok":
		return nil
	case "not-found":
		return fmt.Errorf("redisstore: skip: %q: %w", id, dedupe.ErrNotFound)
	case "not-held":
		return fmt.Errorf("redisstore: skip: event %q: %w", id, dedupe.ErrNotHeld)
	}
	return fmt.Errorf("redisstore: skip: unexpected reply %q from the script", res)
}

// HeldKeys implements dedupe.Orderer in one script (lua/held.lua), reading the held keys' index
// (Q H) by key from afterKey on, and each key's head and FIFO size.
func (s *Store) HeldKeys(ctx context.Context, namespace, afterKey string, limit int) ([]dedupe.HeldKey, error) {
	_, q, err := s.queue(namespace)
	if err != nil {
		return nil, fmt.Errorf("redisstore: held keys: %w", err)
	}
	if limit <= 0 {
		return nil, nil
	}
	start := "-"
	if afterKey != "" {
		start = "(" + afterKey
	}
	reply, err := heldScript.Run(ctx, s.client, scriptKeys(q, "H"), start, strconv.Itoa(limit)).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: held keys: %w", err)
	}
	held := make([]dedupe.HeldKey, 0, len(reply))
	for _, r := range reply {
		row, ok := r.([]any)
		if !ok || len(row) != 4 {
			return nil, fmt.Errorf("redisstore: held keys: unexpected reply %T from the script", r)
		}
		key, _ := row[0].(string)
		head, _ := row[1].(string)
		sinceNs, _ := row[2].(string)
		waiting, _ := row[3].(int64)
		since, err := parseNanos(sinceNs)
		if err != nil {
			return nil, fmt.Errorf("redisstore: held keys: key %q: %w", key, err)
		}
		held = append(held, dedupe.HeldKey{Key: key, Head: head, Since: since, Waiting: int(waiting)})
	}
	return held, nil
}

// CountHeld implements dedupe.Orderer with one ZCARD of the held keys' index.
func (s *Store) CountHeld(ctx context.Context, namespace string) (int, error) {
	_, q, err := s.queue(namespace)
	if err != nil {
		return 0, fmt.Errorf("redisstore: count held: %w", err)
	}
	n, err := s.client.ZCard(ctx, q+"H").Result()
	if err != nil {
		return 0, fmt.Errorf("redisstore: count held: %w", err)
	}
	return int(n), nil
}
