package badgerstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// This file is the write path the group committer replaced: every write in
// its own transaction, synced by Badger (SyncWrites) and retried on
// optimistic conflicts. Open never uses it; the benchmarks open the
// store in this mode (openBadger with perTxnSync) as the baseline that the
// committer is measured against, on the same request code.

// maxAttempts bounds the retries of a transaction that lost an optimistic
// conflict. A conflict means another writer touched the same key and
// committed first, so a retry re-reads fresh state; needing 100 in a row
// means something is pathologically hot and the caller should hear about it.
const maxAttempts = 100

// updateAlone runs fn in a read-write transaction of its own, retrying it
// from scratch when Badger reports an optimistic conflict. (It is
// badger.DB.Update, telling the store how each transaction ended.)
func (b *Store) updateAlone(ctx context.Context, fn func(*badger.Txn) error) error {
	for range maxAttempts {
		if err := ctx.Err(); err != nil {
			return err
		}
		txn := b.db.NewTransaction(true)
		err := fn(txn)
		if err == nil {
			err = txn.Commit()
		}
		txn.Discard()
		b.settled(txn, err == nil)
		if !errors.Is(err, badger.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("gave up after %d conflicting attempts: %w", maxAttempts, badger.ErrConflict)
}
