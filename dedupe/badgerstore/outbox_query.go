package badgerstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// This file holds the Outbox's reads. They run in read-only transactions on
// a consistent snapshot and never conflict with writers.

// DeliveredVersion implements dedupe.Outbox.
func (b *Store) DeliveredVersion(ctx context.Context, namespace, entity string) (int64, bool, error) {
	dk, err := key(namespace, kindDelivered, entity)
	if err != nil {
		return 0, false, fmt.Errorf("dedupe: delivered version: %w", err)
	}
	var version int64
	var found bool
	err = b.view(ctx, "delivered version", func(txn *badger.Txn) error {
		version, found, err = getVersion(txn, dk)
		return err
	})
	return version, found, err
}

// Get implements dedupe.Outbox; the error wraps ErrNotFound for an event that was
// never accepted or whose retention has passed.
func (b *Store) Get(ctx context.Context, namespace, id string) (*dedupe.Event, error) {
	ok, err := keysFor(namespace, id)
	if err != nil {
		return nil, fmt.Errorf("dedupe: get: %w", err)
	}
	var ev *dedupe.Event
	err = b.view(ctx, "get", func(txn *badger.Txn) error {
		rec, live, err := getRecord(txn, ok.record, b.clock())
		if err != nil {
			return err
		}
		if !live {
			return fmt.Errorf("%q: %w", id, dedupe.ErrNotFound)
		}
		read := getPayload
		if rec.State == dedupe.Delivered || rec.State == dedupe.Superseded {
			read = getPayloadMeta // never sent again: its body may be kept for another destination only
		}
		p, err := read(txn, ok.payload)
		if err != nil {
			return err
		}
		ev = ok.event(rec, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.leases.show(ev)
	return ev, nil
}

// List implements dedupe.Outbox, reading the state index, which sorts each state's
// events by accept time; it costs one index entry, one record and one
// payload read per event returned (plus any index entries whose record
// expired within the last second and is not yet reclaimed). A payload holds
// the body, so a dead letter's costs its body's size to read. A limit <= 0
// returns nothing.
func (b *Store) List(ctx context.Context, namespace string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	return b.list(ctx, "list", namespace, state, after, limit, true)
}

// ListDeliveries is List without the requests: it returns only each event's ID
// and delivery (State, Attempts, NextAttempt, LastStatus, LastError,
// AcceptedAt, UpdatedAt), leaving Entity, Version, Method, URI, Scheme and
// BodyBytes empty. It reads no payload, so it costs one index entry and one
// record (a few dozen bytes and the last error) per event, whatever the size
// of their bodies: a dead-letter page can refresh it every few seconds.
func (b *Store) ListDeliveries(ctx context.Context, namespace string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	return b.list(ctx, "list deliveries", namespace, state, after, limit, false)
}

// list is List, reading each event's payload (less its header and body) only
// withRequest.
func (b *Store) list(ctx context.Context, op, namespace string, state dedupe.State, after dedupe.Cursor, limit int, withRequest bool) ([]*dedupe.Event, error) {
	if !validState(state) {
		return nil, fmt.Errorf("dedupe: %s: unknown state %q", op, state)
	}
	prefix, err := key(namespace, kindState, string(state)+"\x00")
	if err != nil {
		return nil, fmt.Errorf("dedupe: %s: %w", op, err)
	}
	if limit <= 0 {
		return nil, nil
	}
	start := indexKey(namespace, kindState, string(state)+"\x00", after.AcceptedAt, after.ID)
	var out []*dedupe.Event
	err = b.view(ctx, op, func(txn *badger.Txn) error {
		it := keyIterator(txn, prefix)
		defer it.Close()
		now := b.clock()
		for it.Seek(start); it.Valid() && len(out) < limit; it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			if after.ID != "" && bytes.Equal(it.Item().Key(), start) {
				continue
			}
			at, id, err := splitIndexKey(it.Item().Key(), len(prefix))
			if err != nil {
				return err
			}
			ok, err := keysFor(namespace, id)
			if err != nil {
				return err
			}
			rec, live, err := getRecord(txn, ok.record, now)
			if err != nil {
				return err
			}
			if !live || rec.State != state || sortNanos(rec.AcceptedAt) != at {
				continue
			}
			p := &payload{}
			if withRequest {
				if p, err = getPayload(txn, ok.payload); err != nil {
					return err
				}
				p.Header, p.body = nil, nil
			}
			out = append(out, ok.event(rec, p))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, ev := range out {
		b.leases.show(ev)
	}
	return out, nil
}

// view runs fn in a read-only transaction and wraps errors with op. A failed
// store refuses reads too: they could see writes the disk never kept.
func (b *Store) view(ctx context.Context, op string, fn func(*badger.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dedupe: %s: %w", op, err)
	}
	if err := b.failed.get(); err != nil {
		return fmt.Errorf("dedupe: %s: %w", op, err)
	}
	if err := b.use.enter(); err != nil {
		return fmt.Errorf("dedupe: %s: %w", op, err)
	}
	defer b.use.leave()
	if err := b.db.View(fn); err != nil {
		return fmt.Errorf("dedupe: %s: %w", op, redact(err))
	}
	return nil
}
