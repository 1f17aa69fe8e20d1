package badgerstore

import (
	"bytes"
	"context"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// recoverLeases makes every event that a previous process leased but never updated due at now.
// Badger locks its directory, so at open no other process can hold a live lease: those events
// were in flight when the process died, and waiting out their leases would only delay them.
// It reads the leased index (outbox_keys.go), not every key, and recovers the events in a few
// transactions, not one synced commit each, while the first requests wait. (An event leased by
// a version that kept no leased index is not found; it comes due when its lease ends.)
func (b *Store) recoverLeases(now time.Time) error {
	var orphans []outboxKeys
	err := b.db.View(func(txn *badger.Txn) error {
		var err error
		orphans, err = leasedEvents(txn)
		return err
	})
	if err != nil {
		return err
	}
	for len(orphans) > 0 {
		var done int
		err := b.update(context.Background(), "recover leases", func(txn *badger.Txn) error {
			done = 0
			var budget txnBudget
			for _, ok := range orphans {
				if done == recoverBatch {
					return nil
				}
				old, live, err := getRecord(txn, ok.record, now)
				if err != nil {
					return err
				}
				if live && old.State == dedupe.Pending && old.Leased {
					if !budget.take(recoverSize(ok, old)) {
						return nil
					}
					rec := *old
					rec.NextAttempt, rec.Leased = now, false
					if err := b.store(txn, ok, old, &rec, time.Time{}); err != nil {
						return err
					}
				}
				done++
			}
			return nil
		})
		if err != nil {
			return err
		}
		orphans = orphans[done:]
	}
	return nil
}

// leasedEvents lists the events in every namespace's leased index. Keys sort by namespace, so
// it reads each namespace's index and then seeks past the namespace's other keys: besides the
// index, it reads one key per namespace.
func leasedEvents(txn *badger.Txn) ([]outboxKeys, error) {
	it := keyIterator(txn, nil)
	defer it.Close()
	var out []outboxKeys
	it.Rewind()
	for it.Valid() {
		ns, _, found := bytes.Cut(it.Item().Key(), []byte{0})
		if !found { // not a key of this package
			it.Next()
			continue
		}
		namespace := string(ns)
		prefix, err := key(namespace, kindLeased, "")
		if err != nil {
			return nil, err
		}
		for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
			ok, err := keysFor(namespace, string(it.Item().Key()[len(prefix):]))
			if err != nil {
				return nil, err
			}
			out = append(out, ok)
		}
		// Every key of the namespace starts "<ns>\x00"; the next namespace's are past "<ns>\x01".
		it.Seek(append([]byte(namespace), 1))
	}
	return out, nil
}
