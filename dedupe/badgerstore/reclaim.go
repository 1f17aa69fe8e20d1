package badgerstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// reclaimKey is written, then dropped, by Reclaim: dropping a prefix is Badger's only way to
// flush its memtables and compact level 0 on demand. The empty namespace is no route's.
var reclaimKey = []byte("\x00r\x00reclaim")

// Reclaim gives the disk back the space of delivered and expired bodies now, rather than when
// Badger gets round to it, for a disk running out of room (the caller's disk watermark).
//
// Value-log GC rewrites only the files whose garbage Badger has counted, and Badger counts it
// only when a compaction drops the old versions that pointed into them. A drained backlog
// leaves its dropped bodies' old versions in the memtable and a level-0 table or two, below
// the count of tables that starts a compaction, so without this their files stay on disk
// however long the queue is empty. Reclaim flushes the memtables and compacts level 0 (by
// writing and dropping reclaimKey), then runs value-log GC until no file qualifies.
//
// The flush and compaction write new tables before deleting what they replace: the watermark
// keeps room for that (see defaultMinFree in caddymodule). Badger refuses writes while it
// drops a prefix, so the committer waits meanwhile; requests queue for that long (well under
// a second for a gateway-sized ledger).
func (b *Store) Reclaim(ctx context.Context) error {
	if err := b.update(ctx, "reclaim", func(txn *badger.Txn) error {
		return txn.Set(reclaimKey, nil)
	}); err != nil {
		return err
	}
	if err := b.use.enter(); err != nil {
		return fmt.Errorf("dedupe: reclaim: %w", err)
	}
	defer b.use.leave()
	b.rewrites.Lock()
	err := b.commits.exclusive(func() error { return b.db.DropPrefix(reclaimKey) })
	b.rewrites.Unlock()
	if err != nil {
		// A flush that failed half way leaves Badger's live memtable also queued for flushing,
		// which its flusher later finds and asserts on (a crash of the process): the store is
		// failed, so the pool closes it and reopens it from disk.
		err = fmt.Errorf("dedupe: reclaim: compacting: %w", redact(err))
		b.failed.fail(err)
		return err
	}
	for !b.use.stopping() {
		err := b.collectGarbage()
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("dedupe: reclaim: value-log GC: %w", err)
		}
	}
	return nil
}
