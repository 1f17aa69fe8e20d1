package badgerstore

import (
	"context"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// Lease implements dedupe.Outbox. It scans the namespace's due index, which sorts by
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
// An index entry that does not match its record, such as the lease expiry of
// an event delivered or rescheduled within its lease (see store), is deleted
// as the scan walks past it. Thousands of those can come due at once, and a
// caller can ask for thousands of events, so the work of one transaction is
// bounded (outbox_lease_budget.go): a call goes on in further transactions,
// a bounded number of them, and may hand out fewer than n events while more
// are due; the next call carries on from where it stopped.
func (b *Store) Lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
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

// lease is Lease without taking turns, safe all the same. It leases in rounds of one bounded
// transaction each (leaseRound), until it has n events, reaches the events due at now, or has
// done leaseRounds, so that a call's work is bounded too. Events already leased when a later
// round fails are handed out all the same, as a committed lease must be; the next call meets
// the error again.
func (b *Store) lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
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
	var out []*dedupe.Event
	for round := range leaseRounds {
		if len(out) == n || (round > 0 && ctx.Err() != nil) {
			break
		}
		evs, cut, err := b.leaseRound(ctx, namespace, prefix, now, n-len(out), now.Add(lease))
		if err != nil {
			if len(out) > 0 {
				break
			}
			return nil, err
		}
		out = append(out, evs...)
		if !cut {
			break
		}
	}
	return out, nil
}

// leaseRound leases up to n events due at or before now in one transaction, until then, and
// deletes the stale entries it walks past, within the bounds of one transaction (outbox_lease_budget.go).
// cut says it stopped at those bounds, with entries due at now still beyond.
func (b *Store) leaseRound(ctx context.Context, namespace string, prefix []byte, now time.Time, n int, until time.Time) (out []*dedupe.Event, cut bool, err error) {
	from := b.floors.start(namespace, b.clock())
	var scan dueScan
	err = b.update(ctx, "lease", func(txn *badger.Txn) error {
		out = out[:0]
		var err error
		if scan, err = scanDue(txn, namespace, prefix, from, sortNanos(now), n, b.clock()); err != nil {
			return err
		}
		for _, k := range scan.stale {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		for _, d := range scan.due {
			if err := txn.Delete(d.key); err != nil {
				return err
			}
			wasLeased := d.rec.Leased
			d.rec.NextAttempt = until
			d.rec.Leased = true
			d.rec.Leases++ // the new holder's token
			if err := putRecord(txn, d.keys.record, d.rec, time.Time{}); err != nil {
				return err
			}
			if err := d.keys.setLeased(txn, wasLeased, true); err != nil {
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
		return nil, false, err
	}
	b.floors.raise(namespace, scan.earliest)
	return out, scan.cut, nil
}

// dueEvent is a Pending event found in the due index.
type dueEvent struct {
	key  []byte // its due-index entry
	keys outboxKeys
	rec  *outboxRecord
}

// dueScan is what scanDue found.
type dueScan struct {
	due   []dueEvent // events to lease, in due order
	stale [][]byte   // due-index keys found not to match their record, to delete
	// earliest is the due time of the earliest entry the scan leaves in place (the limit
	// when it found none): the floor, once the transaction is committed.
	earliest uint64
	cut      bool // stopped at the bounds of one transaction, before the limit
}

// scanDue finds up to n events due at or before the limit (sortNanos), starting at from, and
// the stale entries before them, as many as one transaction's bounds take (outbox_lease_budget.go).
// Records expired at clock are stale. Writes must wait until it returns: the iterator is closed
// by then.
func scanDue(txn *badger.Txn, namespace string, prefix []byte, from, limit uint64, n int, clock time.Time) (dueScan, error) {
	it := keyIterator(txn, prefix)
	defer it.Close()
	scan := dueScan{earliest: limit}
	var budget txnBudget
	for it.Seek(seekKey(prefix, from)); it.Valid(); it.Next() {
		k := it.Item().KeyCopy(nil)
		at, id, err := splitIndexKey(k, len(prefix))
		if err != nil {
			return dueScan{}, err
		}
		if at > limit || len(scan.due) == n {
			scan.earliest = min(at, limit)
			break
		}
		ok, err := keysFor(namespace, id)
		if err != nil {
			return dueScan{}, err
		}
		rec, live, err := getRecord(txn, ok.record, clock)
		if err != nil {
			return dueScan{}, err
		}
		if !live || rec.State != dedupe.Pending || sortNanos(rec.NextAttempt) != at {
			if len(scan.stale) == leaseDeletes || !budget.take(deleteSize(k)) {
				scan.earliest, scan.cut = at, true
				break
			}
			scan.stale = append(scan.stale, k)
			continue
		}
		if len(scan.due) == leaseEvents || !budget.take(leaseSize(k, ok, rec)) {
			scan.earliest, scan.cut = at, true
			break
		}
		scan.due = append(scan.due, dueEvent{key: k, keys: ok, rec: rec})
	}
	return scan, nil
}
