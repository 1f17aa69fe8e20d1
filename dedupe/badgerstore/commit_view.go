package badgerstore

import (
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
)

// claimView is the read-only snapshot sync-mode Claims read, opened by the committer after each
// group commit and before it answers that group's callers. A Badger read transaction opened
// while a commit is in flight waits for that commit's sync (oracle.readTs waits on txnMark), so
// a Claim that opened its own met the disk's tail a second time per request; one opened between
// groups, with no commit in flight, does not wait. A write it misses belongs to a caller not yet
// answered, and the Claims that must see such writes wait for them first (commit_writes.go).
//
// Concurrent Gets on one read-only transaction are safe in badger v4.9.6: Txn.Get only reads
// the transaction's fields (discarded, update, readTs) and allocates its own Item, pending
// writes and read tracking are for update transactions only, and Item.Value copies from the
// item's own buffers. Only Discard writes the transaction, so it runs once the last reader is
// done (refs).
type claimView struct {
	cur atomic.Pointer[snapshot]
}

// snapshot is one published read transaction.
type snapshot struct {
	txn *badger.Txn
	// refs counts its readers, plus one while it is the published one; at zero it is discarded.
	refs atomic.Int32
}

// publish opens a snapshot of db and makes it the one Claims read. It must be called when no
// commit is in flight, or opening it waits for that commit.
func (v *claimView) publish(db *badger.DB) {
	s := &snapshot{txn: db.NewTransaction(false)}
	s.refs.Store(1)
	if old := v.cur.Swap(s); old != nil {
		old.release()
	}
}

// acquire returns the published snapshot, held until release, or nil if there is none.
func (v *claimView) acquire() *snapshot {
	for {
		s := v.cur.Load()
		if s == nil {
			return nil
		}
		n := s.refs.Load()
		// At zero it was replaced and discarded meanwhile: load its successor.
		if n > 0 && s.refs.CompareAndSwap(n, n+1) {
			return s
		}
	}
}

// release ends a hold of s, discarding it after its last one.
func (s *snapshot) release() {
	if s.refs.Add(-1) == 0 {
		s.txn.Discard()
	}
}

// close unpublishes the snapshot, which is discarded once its last reader is done; Badger's
// Close must come after that, and no publish after it.
func (v *claimView) close() {
	if s := v.cur.Swap(nil); s != nil {
		s.release()
	}
}
