package badgerstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// Ordered queues (dedupe.Orderer). An event queued with an order key gets the route's next
// sequence number in the write that accepts it, and an entry in its key's FIFO; only the
// key's head, its lowest sequence still Pending (or Dead and holding the key), has a due entry,
// so Lease, untouched, can only ever hand out heads. The outcome that ends a head promotes the
// next event of its key in the same write.
//
//	"<route>\x00n\x00"                               the route's sequence, 8-byte big-endian
//	"<ns>\x00k\x00<uvarint len><key><8-byte seq>"    a key's FIFO → event ID
//	"<ns>\x00K\x00<key>"                             the number of events in the key's FIFO, uvarint
//	"<ns>\x00H\x00<key>"                             a key held by its dead head → 8-byte since (ns), head ID
const (
	kindSequence = 'n'
	kindKeyFIFO  = 'k'
	kindKeyCount = 'K'
	kindHeld     = 'H'
)

var _ dedupe.Orderer = (*Store)(nil)

// fifoPrefix is the prefix of key's FIFO entries in namespace ns (checked).
func fifoPrefix(ns, key string) []byte {
	p := appendKey(nil, ns, kindKeyFIFO, "")
	p = binary.AppendUvarint(p, uint64(len(key)))
	return append(p, key...)
}

// fifoEntry is the FIFO entry of the event of key at seq.
func fifoEntry(ns, key string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(fifoPrefix(ns, key), seq)
}

// nextSequence takes the route's next sequence number in txn.
func nextSequence(txn *badger.Txn, route string) (uint64, error) {
	k := appendKey(nil, route, kindSequence, "")
	var n uint64
	item, err := txn.Get(k)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
	case err != nil:
		return 0, err
	default:
		if err := item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("corrupt sequence of %d bytes", len(v))
			}
			n = binary.BigEndian.Uint64(v)
			return nil
		}); err != nil {
			return 0, err
		}
	}
	n++
	return n, txn.Set(k, binary.BigEndian.AppendUint64(nil, n))
}

// routeSequence takes the route's next sequence number in txn when any of dests is ordered; 0
// (nothing written) when none is.
func routeSequence(txn *badger.Txn, route string, dests []dedupe.Destination) (uint64, error) {
	for _, d := range dests {
		if d.OrderKey != "" {
			return nextSequence(txn, route)
		}
	}
	return 0, nil
}

// keyCount is the number of events in key's FIFO.
func keyCount(txn *badger.Txn, ns, key string) (uint64, error) {
	item, err := txn.Get(appendKey(nil, ns, kindKeyCount, key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var n uint64
	err = item.Value(func(v []byte) error {
		var w int
		if n, w = binary.Uvarint(v); w <= 0 {
			return fmt.Errorf("corrupt key count")
		}
		return nil
	})
	return n, err
}

func setKeyCount(txn *badger.Txn, ns, key string, n uint64) error {
	k := appendKey(nil, ns, kindKeyCount, key)
	if n == 0 {
		return txn.Delete(k)
	}
	return txn.Set(k, binary.AppendUvarint(nil, n))
}

// joinKey appends rec, an event of k's queue at seq, to its key's FIFO: its head when the key
// has none (rec keeps its due time), else waiting (no due time).
func joinKey(txn *badger.Txn, k outboxKeys, rec *outboxRecord, key string, seq uint64) error {
	n, err := keyCount(txn, k.ns, key)
	if err != nil {
		return err
	}
	rec.OrderKey, rec.Seq = key, seq
	if n > 0 {
		rec.NextAttempt = time.Time{}
	}
	if err := txn.Set(fifoEntry(k.ns, key, seq), []byte(k.id)); err != nil {
		return err
	}
	return setKeyCount(txn, k.ns, key, n+1)
}

// leaveKey takes rec, the head of its key in k's queue, out of the FIFO and makes the next
// event of the key its head, due at now.
func (b *Store) leaveKey(txn *badger.Txn, k outboxKeys, rec *outboxRecord, now time.Time) error {
	if err := txn.Delete(fifoEntry(k.ns, rec.OrderKey, rec.Seq)); err != nil {
		return err
	}
	n, err := keyCount(txn, k.ns, rec.OrderKey)
	if err != nil {
		return err
	}
	if err := setKeyCount(txn, k.ns, rec.OrderKey, max(n, 1)-1); err != nil || n <= 1 {
		return err
	}
	// From just past the head, so that the tombstones of a hot key's earlier heads are not walked.
	prefix := fifoPrefix(k.ns, rec.OrderKey)
	it := keyIterator(txn, prefix)
	defer it.Close()
	it.Seek(fifoEntry(k.ns, rec.OrderKey, rec.Seq+1))
	if !it.ValidForPrefix(prefix) {
		return fmt.Errorf("key %q of %q counts %d events but holds none after %d", rec.OrderKey, k.ns, n-1, rec.Seq)
	}
	id, err := it.Item().ValueCopy(nil)
	if err != nil {
		return err
	}
	next, err := keysFor(k.ns, string(id))
	if err != nil {
		return err
	}
	old, live, err := getRecord(txn, next.record, now)
	if err != nil || !live {
		return err
	}
	head := *old
	head.NextAttempt = now
	return b.store(txn, next, old, &head, time.Time{})
}

// holdKey marks rec, a dead head, as holding its key.
func holdKey(txn *badger.Txn, k outboxKeys, rec *outboxRecord, now time.Time) error {
	rec.Holds = true
	v := binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))
	return txn.Set(appendKey(nil, k.ns, kindHeld, rec.OrderKey), append(v, k.id...))
}

// releaseHold ends the hold of rec on its key.
func releaseHold(txn *badger.Txn, k outboxKeys, rec *outboxRecord) error {
	rec.Holds = false
	return txn.Delete(appendKey(nil, k.ns, kindHeld, rec.OrderKey))
}

// replayInOrder places rec, a dead letter being replayed, in its key's order: a held head goes
// first again (it is still its key's lowest); one that left its key (skipped) joins it at the
// tail under a new sequence number.
func (b *Store) replayInOrder(txn *badger.Txn, k outboxKeys, rec *outboxRecord) error {
	switch {
	case rec.OrderKey == "":
		return nil
	case rec.Holds:
		return releaseHold(txn, k, rec)
	}
	seq, err := nextSequence(txn, routeOf(k.ns))
	if err != nil {
		return err
	}
	return joinKey(txn, k, rec, rec.OrderKey, seq)
}

// updateWaiting stores rec, the outcome of old, an event waiting behind its key's head: Pending,
// it goes on waiting; final, it leaves its key without promoting anything (the head is still out)
// and holds nothing.
func (b *Store) updateWaiting(txn *badger.Txn, k outboxKeys, old, rec *outboxRecord, now time.Time, keep time.Duration) error {
	if rec.State == dedupe.Pending {
		rec.NextAttempt = time.Time{}
		return b.store(txn, k, old, rec, time.Time{})
	}
	expires := now.Add(keep)
	if _, err := settlePayload(txn, k, rec.State, expires, now); err != nil {
		return err
	}
	if err := b.store(txn, k, old, rec, expires); err != nil {
		return err
	}
	if err := txn.Delete(fifoEntry(k.ns, rec.OrderKey, rec.Seq)); err != nil {
		return err
	}
	n, err := keyCount(txn, k.ns, rec.OrderKey)
	if err != nil {
		return err
	}
	return setKeyCount(txn, k.ns, rec.OrderKey, max(n, 1)-1)
}

// Skip implements dedupe.Orderer.
func (b *Store) Skip(ctx context.Context, namespace, id string, now time.Time, keep time.Duration) error {
	ok, err := keysFor(namespace, id)
	if err != nil {
		return fmt.Errorf("dedupe: skip: %w", err)
	}
	return b.update(ctx, "skip", func(txn *badger.Txn) error {
		old, err := b.deadRecord(txn, ok)
		switch {
		case errors.Is(err, dedupe.ErrNotDead) || err == nil && !old.Holds:
			return fmt.Errorf("event %q: %w", id, dedupe.ErrNotHeld)
		case err != nil:
			return err
		}
		rec := *old
		if err := releaseHold(txn, ok, &rec); err != nil {
			return err
		}
		expires := now.Add(keep)
		if _, err := settlePayload(txn, ok, dedupe.Dead, expires, now); err != nil {
			return err
		}
		if err := b.store(txn, ok, old, &rec, expires); err != nil {
			return err
		}
		return b.leaveKey(txn, ok, &rec, now)
	})
}

// HeldKeys implements dedupe.Orderer.
func (b *Store) HeldKeys(ctx context.Context, namespace, afterKey string, limit int) ([]dedupe.HeldKey, error) {
	prefix, err := key(namespace, kindHeld, "")
	if err != nil {
		return nil, fmt.Errorf("dedupe: held keys: %w", err)
	}
	var held []dedupe.HeldKey
	err = b.view(ctx, "held keys", func(txn *badger.Txn) error {
		it := keyIterator(txn, prefix)
		defer it.Close()
		for it.Seek(append(append(prefix, afterKey...), 0)); it.ValidForPrefix(prefix) && len(held) < limit; it.Next() {
			h := dedupe.HeldKey{Key: string(it.Item().Key()[len(prefix):])}
			if err := it.Item().Value(func(v []byte) error {
				if len(v) < 8 {
					return fmt.Errorf("corrupt held key %q", h.Key)
				}
				h.Since, h.Head = time.Unix(0, int64(binary.BigEndian.Uint64(v))), string(v[8:])
				return nil
			}); err != nil {
				return err
			}
			n, err := keyCount(txn, namespace, h.Key)
			if err != nil {
				return err
			}
			h.Waiting = int(max(n, 1) - 1)
			held = append(held, h)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return held, nil
}

// CountHeld implements dedupe.Orderer, walking the held keys' index.
func (b *Store) CountHeld(ctx context.Context, namespace string) (int, error) {
	prefix, err := key(namespace, kindHeld, "")
	if err != nil {
		return 0, fmt.Errorf("dedupe: count held: %w", err)
	}
	n := 0
	err = b.view(ctx, "count held", func(txn *badger.Txn) error {
		it := keyIterator(txn, prefix)
		defer it.Close()
		for it.Rewind(); it.ValidForPrefix(prefix); it.Next() {
			n++
		}
		return nil
	})
	return n, err
}
