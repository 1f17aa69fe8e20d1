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
// event's ID. A destination that still holds a live delivery of the ID keeps it, and the stored
// request then serves both: its list of destinations becomes the union, so the body is kept
// while any of them may send or replay it (settlePayload). A request stored for one destination
// whose queue is not among c's names no destination: then nothing is queued, since the body could
// not be shared safely, and the ID is marked done all the same.
func (b *Store) DoneAndQueue(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) error {
	if len(c.Destinations) == 0 {
		return errors.New("dedupe: done and queue: no destination")
	}
	queues, _, err := acceptKeys(c, ev, ttl)
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
		fresh, held, err := b.unheldQueues(txn, queues, now)
		if err != nil || len(fresh) == 0 {
			return err
		}
		q := *p // the closure may run again: p stays as given
		var share bool
		if q.Destinations, share, err = sharedDestinations(txn, queues[0].payload, fresh, held); err != nil || !share {
			return err
		}
		if err := txn.Set(queues[0].payload, q.encode()); err != nil {
			return err
		}
		for _, k := range fresh {
			old, _, err := getRecord(txn, k.record, now)
			if err != nil {
				return err
			}
			b.leases.drop(k.ns, k.id)
			rec := outboxRecord{State: dedupe.Pending, AcceptedAt: acceptedAt, NextAttempt: due, UpdatedAt: updatedAt}
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

// unheldQueues splits queues into those without a live delivery of the event's ID, which get
// the new one, and those that hold one and keep it.
func (b *Store) unheldQueues(txn *badger.Txn, queues []outboxKeys, now time.Time) (fresh, held []outboxKeys, err error) {
	for _, k := range queues {
		_, live, err := getRecord(txn, k.record, now)
		if err != nil {
			return nil, nil, err
		}
		if live {
			held = append(held, k)
		} else {
			fresh = append(fresh, k)
		}
	}
	return fresh, held, nil
}

// sharedDestinations is the list of destinations the request stored at k is to name once the
// fresh queues get a delivery of it: theirs, the held queues' (which keep theirs) and any the
// stored request already names; nil when that is one destination (format 1). share is false
// when nothing may be queued: a request is stored for one destination, which it does not name,
// and no held queue is that one, so a live delivery elsewhere may need it as it is.
func sharedDestinations(txn *badger.Txn, k []byte, fresh, held []outboxKeys) (names []string, share bool, err error) {
	stored, found, err := payloadMetaIfAny(txn, k)
	switch {
	case err != nil:
		return nil, false, err
	case found && len(stored.Destinations) > 0:
		names = slices.Clone(stored.Destinations)
	case found && len(held) == 0:
		return nil, false, nil
	}
	for _, q := range slices.Concat(held, fresh) {
		if _, name := dedupe.SplitQueueNamespace(q.ns); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if len(names) == 1 {
		return nil, true, nil
	}
	return names, true, nil
}
