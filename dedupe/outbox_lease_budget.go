package dedupe

// Badger refuses a transaction (ErrTxnTooBig) past 15% of the memtable, which options.go sets to
// 4 MiB: 629,145 bytes of entries, and 6,553 entries (that size over the 96 bytes of the
// skiplist's largest node). A delete is an entry too. A Lease that deleted every stale due
// entry it walked past in one transaction failed once more than ~6,500 had come due at once
// (the lease expiries of events delivered within their lease, after a pause of Leases such as
// a restart), and so did every Lease after it, for good; so did a Lease of thousands of events.
//
// So one Lease transaction takes at most leaseDeletes stale entries and leaseEvents events
// (three entries each), and leaseBytes of entries as Badger counts them: 1,000 + 768 entries,
// about a quarter of Badger's count, and with 40-byte IDs ~130 KB, a fifth of its bytes, under
// leaseBytes (a quarter). The rest leaves room for the other requests of its group commit
// (commit.go), and leaseBytes bounds the rounds of events with long IDs. A Lease goes on in
// further transactions, up to leaseRounds, so one call does at most 16,000 deletes and leases
// 4,096 events; the next call continues where it stopped (the floor, outbox_floor.go).
const (
	leaseDeletes = 1000
	leaseEvents  = 256
	leaseBytes   = 160 << 10
	leaseRounds  = 16
)

// entryOverhead is what Badger adds to an entry's key and value when it sizes a transaction:
// two meta bytes and ten for the version (txn.go, checkSize).
const entryOverhead = 12

// leaseBudget counts the writes one Lease transaction has taken on.
type leaseBudget struct {
	deletes, events, bytes int
}

// takeDelete reports whether the deletion of due-index key k fits, and counts it if so.
func (b *leaseBudget) takeDelete(k []byte) bool {
	if b.deletes == leaseDeletes {
		return false
	}
	return b.take(len(k)+entryOverhead, &b.deletes)
}

// takeEvent reports whether leasing the event whose due entry is k fits, and counts it if so:
// its due entry is deleted and written again, and its record rewritten.
func (b *leaseBudget) takeEvent(k []byte, ok outboxKeys, rec *outboxRecord) bool {
	if b.events == leaseEvents {
		return false
	}
	size := 2*(len(k)+entryOverhead) + len(ok.record) + maxRecordLen + len(rec.LastError) + entryOverhead
	return b.take(size, &b.events)
}

// take adds size bytes and one to count, unless that goes past leaseBytes; the first write of
// a transaction is always taken, so that every round makes progress (a record that fitted in
// the transaction that wrote it fits in one of its own again).
func (b *leaseBudget) take(size int, count *int) bool {
	if b.bytes+size > leaseBytes && b.bytes > 0 {
		return false
	}
	b.bytes += size
	*count++
	return true
}
