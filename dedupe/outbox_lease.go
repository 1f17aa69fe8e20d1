package dedupe

import (
	"context"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Lease implements Outbox. It scans the namespace's due index, which sorts by
// due time, from the start up to now, so its cost is the number of events it
// hands out, not the size of the queue.
//
// An event is never handed to two callers within its lease: writes are
// applied one at a time (commit.go), so a Lease sees the due times that the
// Leases before it moved, even in the same group commit. Leases of one
// namespace also take turns (Badger locks its directory, so every caller is
// in this process): concurrent ones would all want the same head of the
// queue, and taking turns keeps one namespace's pollers from filling groups
// with Leases that find nothing due. (In the per-transaction baseline of the
// benchmarks, the turns also keep Leases from failing each other with
// optimistic conflicts; there, of two that took the same event the later
// one to commit fails and is retried against the winner's writes.)
//
// An index entry that does not match its record is skipped and deleted; the
// writes of this package move a record's entries in the same transaction as
// the record, so that is only a safety net.
func (b *Badger) Lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*Event, error) {
	turn, ok := b.leasing.Load(namespace)
	if !ok {
		turn, _ = b.leasing.LoadOrStore(namespace, make(chan struct{}, 1))
	}
	select {
	case turn.(chan struct{}) <- struct{}{}:
		defer func() { <-turn.(chan struct{}) }()
	case <-ctx.Done():
		return nil, fmt.Errorf("dedupe: lease: %w", ctx.Err())
	}
	return b.lease(ctx, namespace, now, n, lease)
}

// lease is Lease without taking turns, safe all the same.
func (b *Badger) lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*Event, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("dedupe: lease: lease must be positive, got %v", lease)
	}
	prefix, err := key(namespace, kindDue, "")
	if err != nil {
		return nil, fmt.Errorf("dedupe: lease: %w", err)
	}
	if n <= 0 {
		return nil, nil
	}
	until := now.Add(lease)
	from := b.floors.start(namespace, time.Now())
	var out []*Event
	var earliest uint64
	err = b.update(ctx, "lease", func(txn *badger.Txn) error {
		out = out[:0]
		var due []dueEvent
		var stale [][]byte
		var err error
		due, stale, earliest, err = scanDue(txn, namespace, prefix, from, sortNanos(now), n)
		if err != nil {
			return err
		}
		for _, k := range stale {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		for _, d := range due {
			if err := txn.Delete(d.key); err != nil {
				return err
			}
			d.rec.NextAttempt = until
			d.rec.Leased = true
			if err := putRecord(txn, d.keys.record, d.rec, time.Time{}); err != nil {
				return err
			}
			if err := txn.Set(d.keys.due(until), nil); err != nil {
				return err
			}
			b.floors.lower(namespace, until)
			p, err := getPayload(txn, d.keys.payload)
			if err != nil {
				return err
			}
			out = append(out, d.keys.event(d.rec, p))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.floors.raise(namespace, earliest)
	return out, nil
}

// dueEvent is a Pending event found in the due index.
type dueEvent struct {
	key  []byte // its due-index entry
	keys outboxKeys
	rec  *outboxRecord
}

// scanDue returns up to n events due at or before the limit (sortNanos), in
// due order, starting at from; the due-index keys that were found not to
// match their record; and the due time of the earliest entry it leaves in
// place (limit when it found none). Writes must wait until it returns: the
// iterator is closed by then.
func scanDue(txn *badger.Txn, namespace string, prefix []byte, from, limit uint64, n int) (due []dueEvent, stale [][]byte, earliest uint64, err error) {
	it := keyIterator(txn, prefix)
	defer it.Close()
	now := time.Now()
	earliest = limit
	for it.Seek(seekKey(prefix, from)); it.Valid(); it.Next() {
		k := it.Item().KeyCopy(nil)
		at, id, err := splitIndexKey(k, len(prefix))
		if err != nil {
			return nil, nil, 0, err
		}
		if at > limit || len(due) == n {
			earliest = min(at, limit)
			break
		}
		ok, err := keysFor(namespace, id)
		if err != nil {
			return nil, nil, 0, err
		}
		rec, live, err := getRecord(txn, ok.record, now)
		if err != nil {
			return nil, nil, 0, err
		}
		if !live || rec.State != Pending || sortNanos(rec.NextAttempt) != at {
			stale = append(stale, k)
			continue
		}
		due = append(due, dueEvent{key: k, keys: ok, rec: rec})
	}
	return due, stale, earliest, nil
}
