package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// DoneAndQueue implements dedupe.Outbox: Done's writes and the event's deliveries to c's
// destinations, in one group-committed transaction. The claim is held in memory (claims.go) and
// ends once the write is synced, as Done's.
//
// The request is stored once under the route, shared by every queue holding a delivery of the
// event's ID. A queue that still holds a live delivery of the ID, one of c's or another, keeps
// it, and the stored request then serves both: it names them all, so the body is kept while any
// of them may send or replay it (settlePayload).
func (b *Store) DoneAndQueue(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) error {
	if len(c.Destinations) == 0 {
		return errors.New("dedupe: done and queue: no destination")
	}
	queues, dests, err := acceptKeys(c, ev, ttl)
	if err != nil {
		return fmt.Errorf("dedupe: done and queue: %w", err)
	}
	ids, vk, err := keys(c)
	if err != nil {
		return fmt.Errorf("dedupe: done and queue: %w", err)
	}
	p := payloadOf(ev)
	if p.encodedLen() > dedupe.MaxPayload {
		return fmt.Errorf("dedupe: done and queue: %w", dedupe.ErrTooLarge)
	}
	acceptedAt, due, updatedAt := dedupe.AcceptTimes(ev, b.clock())
	err = b.write(ctx, "done and queue", b.declare(ids, vk), func(txn *badger.Txn) error {
		now := b.clock()
		if err := markDone(txn, ids, now.Add(ttl)); err != nil {
			return err
		}
		if vk != nil {
			stored, found, err := getVersion(txn, vk)
			if err != nil {
				return err
			}
			if !found || c.Version > stored {
				if err := advanceAccepted(txn, c, vk, queues); err != nil {
					return err
				}
			}
		}
		heldKeys, err := liveOwners(txn, queues[0], now)
		if err != nil {
			return err
		}
		var fresh []outboxKeys
		for _, q := range queues {
			if !slices.ContainsFunc(heldKeys, func(k outboxKeys) bool { return k.ns == q.ns }) {
				fresh = append(fresh, q)
			}
		}
		if len(fresh) == 0 {
			return nil
		}
		shared := *p // the closure may run again: p stays as given
		shared.Destinations = storedDestinations(slices.Concat(heldKeys, fresh))
		if err := txn.Set(queues[0].payload, shared.encode()); err != nil {
			return err
		}
		seq, err := routeSequence(txn, c.Namespace, dests)
		if err != nil {
			return err
		}
		for _, k := range fresh {
			old, _, err := getRecord(txn, k.record, now)
			if err != nil {
				return err
			}
			b.leases.drop(k.ns, k.id)
			rec := outboxRecord{State: dedupe.Pending, AcceptedAt: acceptedAt, NextAttempt: due, UpdatedAt: updatedAt}
			if key := dests[slices.IndexFunc(queues, func(q outboxKeys) bool { return q.ns == k.ns })].OrderKey; key != "" {
				if err := joinKey(txn, k, &rec, key, seq); err != nil {
					return err
				}
			}
			if err := b.store(txn, k, old, &rec, time.Time{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.claims.dropAll(ids)
	return nil
}

// storedDestinations is the list of destinations a request stored for queues names: none for the
// route's own queue alone, which is how a request was stored before destinations (format 1).
func storedDestinations(queues []outboxKeys) []string {
	if len(queues) == 1 && routeOf(queues[0].ns) == queues[0].ns {
		return nil
	}
	names := make([]string, len(queues))
	for i, q := range queues {
		_, names[i] = dedupe.SplitQueueNamespace(q.ns)
	}
	return names
}

// liveOwners is the queues that the request stored for the event of k (a key of it in any of its
// route's queues) serves and that hold a live delivery of it: those the request names, or the
// route's own for a request that names none.
func liveOwners(txn *badger.Txn, k outboxKeys, now time.Time) ([]outboxKeys, error) {
	stored, found, err := payloadMetaIfAny(txn, k.payload)
	if err != nil || !found {
		return nil, err
	}
	route := routeOf(k.ns)
	owners := stored.Destinations
	if len(owners) == 0 {
		owners = []string{dedupe.DefaultDestination}
	}
	var live []outboxKeys
	for _, name := range owners {
		ok, err := keysFor(dedupe.QueueNamespace(route, name), k.id)
		if err != nil {
			return nil, err
		}
		_, isLive, err := getRecord(txn, ok.record, now)
		if err != nil {
			return nil, err
		}
		if isLive {
			live = append(live, ok)
		}
	}
	return live, nil
}
