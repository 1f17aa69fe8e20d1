package badgerstore

import (
	"context"

	"github.com/dgraph-io/badger/v4"
)

// declare returns the claimKeys of a write of a Claim's dedupe keys ids and version key vk.
func (b *Store) declare(ids [][]byte, vk []byte) claimKeys {
	return b.commits.writes.of(ids, vk)
}

// readClaim runs fn on a read-only view of the ledger that holds every write of ids' and vk's
// keys that was queued or in flight when it was called: the published snapshot
// (commit_view.go), once every such write is published (or the store's failure, if one
// failed).
func (b *Store) readClaim(ctx context.Context, ids [][]byte, vk []byte, fn func(*badger.Txn) error) error {
	ks := b.commits.writes.of(ids, vk)
	if err := b.commits.writes.await(ctx, &ks); err != nil {
		return err
	}
	// A write waited for may have failed after Badger applied it, which reopening reads back:
	// the snapshot before it would answer as if it never happened (failure.go).
	if err := b.failed.get(); err != nil {
		return err
	}
	if err := b.use.enter(); err != nil {
		return err
	}
	defer b.use.leave()
	// Published from the committer's start until it closes, which comes after use refuses.
	s := b.commits.view.acquire()
	defer s.release()
	return fn(s.txn)
}
