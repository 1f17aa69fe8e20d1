package badgerstore

import (
	"errors"
	"reflect"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
)

// Badger keeps values of ValueThreshold bytes or more (queued bodies, see
// Open) in its value log, and reclaims the space of deleted, expired or
// overwritten ones only when asked to. These set how often it is asked.
const (
	// gcInterval is how often the value log is checked for reclaimable files.
	// A delivered event's body is dropped at once (see shed), so in async
	// mode most of a value-log file is garbage soon after it is written; at
	// 5 minutes, disk use swung by 5 minutes of traffic (1.3 KiB an event).
	// A check that finds nothing to rewrite only reads Badger's discard
	// statistics.
	gcInterval = time.Minute
	// gcDiscardRatio is the share of a value-log file that must be garbage
	// before it is rewritten; Badger recommends 0.5, a lifetime write
	// amplification of 2.
	gcDiscardRatio = 0.5
)

// startCollector starts collecting garbage every gcInterval, by calling step
// (Store.collectGarbage), until closed.
func startCollector(step func() error, log badger.Logger) *background {
	return startBackground(func(stop <-chan struct{}) {
		tick := time.NewTicker(gcInterval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			// Each successful run rewrites one file; go on while files qualify.
			for {
				err := step()
				// A failed store was logged where its write failed, and rewrites nothing until reopened.
				if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) || errors.Is(err, ErrStoreFailed) {
					break
				}
				if err != nil {
					log.Warningf("value log GC: %v", err)
					break
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}
	})
}

// collectGarbage rewrites at most one value-log file that qualifies, or
// returns badger.ErrNoRewrite (or ErrRejected while another runs), with the
// committer kept out while the rewrite starts: it reads the newest version in
// the memtable (DB.MaxVersion) under a lock Badger's writer does not take when
// it sets it, a data race. Between groups no write is in flight, and the lock
// of exclusiveStart orders that read after the last commit's write.
//
// Only the start: the committer goes on once the rewrite has set Badger's
// flag that it is in flight (rewriteFlag), which it does right after that
// read. The rest of a rewrite, a lookup in the LSM tree for each value in the
// file and the write-back of the live ones, runs beside the commits, as Badger
// means it to (its write-back keeps each value's old version, so it changes
// nothing a request reads). Holding the committer for all of it stalled every
// request for as long as the rewrite took: 10-85 ms with the ledger in the
// page cache, but 20-30 s for one 8 MiB file in a 150 MiB memory cgroup with a
// million events queued, each lookup faulting table pages back from disk.
//
// That start reads every table's index (DB.MaxVersion lists the tables), from
// the mapped files. Under a memory cap their pages may have been evicted, and
// faulting a few hundred of them back holds the committer out meanwhile: so
// they are read first, outside it (DB.Tables, which takes no lock the writer
// takes), for the start to find them in memory if the page cache keeps them
// that long. With 350 tables under a 150 MiB cap while a drain read bodies
// back, it did not always: goroutine dumps still caught the start faulting
// them, and requests went up to 0.9 s unanswered during a minute of rewrites.
//
// Never on a failed store (failure.go), which writes nothing until it is
// reopened: a rewrite's write-back would go through the writes that just
// failed, and its syncs would make the failed group's writes durable. The
// store's failure is read with the committer kept out, where a group's failure
// is recorded, so none fails between the check and the rewrite's start.
//
// One rewrite at a time, and never beside Reclaim's prefix drop (rewrites):
// once started, a rewrite writes beside the committer, and a drop swaps the
// memtable a write-back may be writing into.
func (b *Store) collectGarbage() error {
	b.rewrites.Lock()
	defer b.rewrites.Unlock()
	b.db.Tables()
	return b.commits.exclusiveStart(func() error {
		if err := b.failed.get(); err != nil {
			return err
		}
		return b.db.RunValueLogGC(gcDiscardRatio)
	}, b.rewriting)
}

// rewriteFlag is Badger's own record that a value-log rewrite is in flight
// (DB.gcActive, set once the rewrite has read DB.MaxVersion and cleared when it
// returns), or nil if this Badger has none, when collectGarbage keeps the
// committer out for the whole rewrite. Badger does not export it; it is read
// with atomic loads, as Badger's compactions read it, which also order the
// rewrite's read of MaxVersion before the commits that follow.
func rewriteFlag(db *badger.DB) *atomic.Bool {
	f := reflect.ValueOf(db).Elem().FieldByName("gcActive")
	if !f.IsValid() || f.Type() != reflect.TypeFor[atomic.Bool]() {
		return nil
	}
	return (*atomic.Bool)(unsafe.Pointer(f.UnsafeAddr()))
}
