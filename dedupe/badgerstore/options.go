package badgerstore

import (
	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/hookgate/hookgate/dedupe"
)

// valueLogFileSize is the size of a value-log file, which is also the largest
// value Badger stores: Badger refuses a value larger than a value-log file, so
// the file holds the largest event the contract lets an Outbox queue.
const valueLogFileSize = dedupe.MaxPayload

// badgerOptions is the one place the store's Badger profile is chosen. The
// gateway runs at the edge next to Caddy, so the profile is sized for a
// resident set of tens of MiB (targets: 64 MiB idle for the whole process,
// 150 MiB with a million events in the ledger), not for Badger's defaults of
// several hundred MiB of memtables and caches.
//
// The logger is set by the caller: each store has its own (logger.go).
func badgerOptions(dir string) badger.Options {
	opts := badger.DefaultOptions(dir).
		// Every commit is synced by Badger itself: the WAL is msynced per
		// write request and the value log once per batch of requests, in
		// the order (value log first) that keeps a synced WAL entry from
		// pointing at unsynced value-log bytes. It also keeps memtable
		// rotation and value-log GC safe, which unsynced commits followed by
		// an explicit db.Sync() would not be: Sync covers only the current
		// memtable's WAL (one rotated out after the commit stays unsynced
		// until flushed), and GC deletes a rewritten value-log file before
		// the values it moved are synced. The cost of syncing is paid once
		// per group commit, which holds many requests (commit.go).
		WithSyncWrites(true).
		// The committer is the only writer and applies requests one after
		// another, so Claim's "exactly one wins" holds without Badger's
		// conflict tracking, which would cost a read-set per transaction
		// and a list of committed write-sets.
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		// A memtable's arena is MemTableSize plus 30%, allocated whole on
		// the Go heap when the memtable is created, so each costs up to
		// ~5.2 MiB at 4 MiB (Badger's default is 64 MiB), plus its WAL,
		// mapped at twice the size and resident as far as written. Two are
		// the minimum that lets writes go on while one is flushed. 4 MiB
		// still holds a group commit of hundreds of requests: Badger caps
		// one transaction at 15% of it (and commit.go splits bigger groups).
		WithMemTableSize(4 << 20).
		WithNumMemtables(2).
		// No compression, and so no block cache (Badger needs one only to
		// hold decompressed blocks): ledger values are 8-9 bytes and keys
		// are already prefix-compressed within a block, so Snappy would
		// save little disk while costing CPU on every flush, compaction
		// and read, plus a cache of decompressed blocks on the Go heap.
		// Uncompressed blocks are read straight from the mmapped table,
		// where the kernel can reclaim them.
		WithCompression(options.None).
		WithBlockCacheSize(0).
		// No index cache either: Badger reads an unencrypted table's index
		// and bloom filter (about 10 bits a key) straight from the mapped
		// file, and uses the cache only for encrypted tables. They are page
		// cache, not heap: about 8 bytes per event in the ledger, read on
		// every lookup (docs/operations.md, "Sizing memory for a backlog").
		WithIndexCacheSize(0).
		// Ledger records are a few bytes and stay in the LSM tree; queued
		// bodies of a KiB or more go to the value log, which the collector
		// (gc.go) reclaims. Smaller value-log files are mapped in less
		// memory (Badger maps twice the size) and are reclaimed sooner.
		WithValueThreshold(1 << 10).
		WithValueLogFileSize(valueLogFileSize).
		// Badger needs at least two compactors (the first one prefers L0);
		// more would only add goroutines and parallel table builds.
		WithNumCompactors(2).
		// A compaction builds up to 8 tables at once, each in a buffer of
		// twice the table size on the Go heap, and tables grow by
		// TableSizeMultiplier (default 2) per level: with a million events
		// those buffers reached 90 MiB. Tables of 1 MiB at every level keep
		// them to a few MiB, for more (small) files.
		WithBaseTableSize(1 << 20)
	opts.TableSizeMultiplier = 1
	// Kept at their defaults, deliberately: NumLevelZeroTables (5) and
	// NumLevelZeroTablesStall (15), since stalling writes on L0 would stall
	// accepts; BlockSize (4 KiB), a balance of index size and read
	// amplification; BaseLevelSize (10 MiB), already small;
	// NumVersionsToKeep (1).
	return opts
}
