package badgerstore

import "github.com/hookgate/hookgate/dedupe"

// Badger refuses a transaction (ErrTxnTooBig) past 15% of the memtable, which options.go sets to
// 4 MiB: 629,145 bytes of entries, and 6,553 entries (that size over the 96 bytes of the
// skiplist's largest node). A delete is an entry too. A Lease that deleted every stale due
// entry it walked past in one transaction failed once more than ~6,500 had come due at once
// (the lease expiries of events delivered within their lease, after a pause of Leases such as
// a restart), and so did every Lease after it, for good; so did a Lease of thousands of events.
//
// Leases are held in memory now (outbox_leases.go) and a Lease writes nothing but the stale
// entries it deletes, in a write of its own after its scan. So one scan takes at most
// leaseDeletes stale entries, and txnBytes of them as Badger counts them: 1,000 entries, under a
// sixth of Badger's count, and with 40-byte IDs ~60 KB, under txnBytes (a quarter of Badger's
// bytes), leaving room for the other requests of the delete's group commit (commit.go). It
// hands out at most leaseEvents events, reading each one's body, and walks past at most leaseWalk
// entries that it neither hands out nor deletes (those of leased events, and the stale ones). A
// Lease goes on in further scans, up to leaseRounds, so one call deletes at most 16,000 entries
// and leases 4,096 events; the next call continues where it stopped (the floor,
// outbox_floor.go). Recovery at open (outbox_recover.go) takes recoverBatch events a
// transaction, with the same txnBytes.
const (
	leaseDeletes = 1000
	leaseEvents  = 256
	leaseWalk    = 4096
	leaseRounds  = 16
	recoverBatch = 256
	txnBytes     = 160 << 10
)

// leaseBytes bounds the bodies one Lease reads into memory and hands out, as the Redis store's
// does: it stops once they reach it (the first event always goes). The deliverer sizes a Lease
// on the bodies of the last one (deliver/heldbytes.go), so after small events a Lease of large
// ones would otherwise bring up to leaseEvents × leaseRounds of them at once.
const leaseBytes = 16 << 20

// entryOverhead is what Badger adds to an entry's key and value when it sizes a transaction:
// two meta bytes and ten for the version (txn.go, checkSize).
const entryOverhead = 12

// txnBudget counts the bytes of entries a transaction has taken on, up to txnBytes.
type txnBudget struct{ bytes int }

// take reports whether size more bytes fit, and counts them if so. The first write of a
// transaction always fits, so that every transaction makes progress: the writes of one event
// fitted in the transaction that made them, and fit in one of their own again.
func (b *txnBudget) take(size int) bool {
	if b.bytes+size > txnBytes && b.bytes > 0 {
		return false
	}
	b.bytes += size
	return true
}

// deleteSize is the size of deleting the key k.
func deleteSize(k []byte) int { return len(k) + entryOverhead }

// maxIndexExtra is the most an index key adds to a record key: a state, a NUL and the time.
const maxIndexExtra = len(dedupe.Superseded) + 1 + nanosLen

// recoverSize is the size of making a leased event due again (store): the record rewritten, its
// state entry rewritten, its due entry deleted and written, its leased entry deleted.
func recoverSize(ok outboxKeys, rec *outboxRecord) int {
	return recordSize(ok, rec) + 4*(len(ok.record)+maxIndexExtra+entryOverhead)
}

// recordSize is the size of writing rec.
func recordSize(ok outboxKeys, rec *outboxRecord) int {
	return len(ok.record) + maxRecordLen + len(rec.LastError) + entryOverhead
}
