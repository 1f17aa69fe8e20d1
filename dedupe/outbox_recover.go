package dedupe

import (
	"bytes"
	"context"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// recoverLeases makes every event that a previous process leased but never updated due at now.
// Badger locks its directory, so at open no other process can hold a live lease: those events
// were in flight when the process died, and waiting out their leases would only delay them.
// It scans every key once, at open.
func (b *Badger) recoverLeases(now time.Time) error {
	var orphans []outboxKeys
	err := b.db.View(func(txn *badger.Txn) error {
		it := keyIterator(txn, nil)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			ns, rest, ok := bytes.Cut(k, []byte{0})
			if !ok || len(rest) < 2 || rest[0] != kindOutbox || rest[1] != 0 {
				continue
			}
			ok2, err := keysFor(string(ns), string(rest[2:]))
			if err != nil {
				return err
			}
			rec, live, err := getRecord(txn, ok2.record, now)
			if err != nil {
				return err
			}
			if live && rec.State == Pending && rec.Leased {
				orphans = append(orphans, ok2)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, ok := range orphans {
		err := b.update(context.Background(), "recover lease", func(txn *badger.Txn) error {
			old, live, err := getRecord(txn, ok.record, now)
			if err != nil || !live || old.State != Pending {
				return err
			}
			rec := *old
			rec.NextAttempt, rec.Leased = now, false
			return b.store(txn, ok, old, &rec, time.Time{})
		})
		if err != nil {
			return err
		}
	}
	return nil
}
