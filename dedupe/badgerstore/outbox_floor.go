package badgerstore

import (
	"encoding/binary"
	"math"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// A Lease deletes the due-index entries it takes, and Badger keeps deleted keys as tombstones
// until compaction; a scan from the start of the index walks over all of them, so leasing from a
// large backlog got slower with every event delivered. The floor is where a namespace's scan
// starts instead: the earliest entry the last scan left in place, as the part of its key after
// the index's prefix (due time and ID, so that a scan can resume among events due at one time). Entries of events leased in
// memory are not left in place: their lapsed leases are found in the lease table
// (outbox_leases.go).
//
// Writes never write a due entry in the past (see store), so nothing is written below a floor
// once it is raised. Writes lower it all the same, and every fullScanEvery a scan starts from the
// beginning again, so that a wall clock stepping back can delay an event, never lose it.
//
// A Lease scans a snapshot, not in the committer's order: a write applied before the scan
// started or while it runs may commit after its snapshot, and the scan then does not see its due
// entry. So a scan's raise is capped at the earliest due entry written by a transaction that was
// not committed when the scan began, or that was applied while it ran.
const fullScanEvery = 30 * time.Second

// dueFloors holds each namespace's floor (a floorAt) and when its last full scan was.
type dueFloors struct {
	mu sync.Mutex
	ns map[string]*dueFloor
	// inTxn is, per transaction not yet committed or discarded, the earliest due entry it wrote
	// in each namespace.
	inTxn map[*badger.Txn]map[string]string
}

type dueFloor struct {
	at       string
	fullScan time.Time
	scans    int    // scans in progress
	capAt    string // while scans > 0: the most the floor may be raised to
}

// floorAt is the floor below every entry due at or after t.
func floorAt(t time.Time) string {
	return string(binary.BigEndian.AppendUint64(nil, sortNanos(t)))
}

// noCap is above every floor: a due time of 2^64-1 ns is past what sortNanos returns.
var noCap = string(binary.BigEndian.AppendUint64(nil, math.MaxUint64))

func (f *dueFloors) get(namespace string) *dueFloor {
	if f.ns == nil {
		f.ns = map[string]*dueFloor{}
	}
	d := f.ns[namespace]
	if d == nil {
		d = &dueFloor{}
		f.ns[namespace] = d
	}
	return d
}

// start is where a Lease's scan of namespace begins: the floor, or "" when a full scan is due.
// The scan must end with done.
func (f *dueFloors) start(namespace string, now time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.get(namespace)
	if d.scans == 0 {
		d.capAt = noCap
		for _, dues := range f.inTxn {
			if at, ok := dues[namespace]; ok {
				d.capAt = min(d.capAt, at)
			}
		}
	}
	d.scans++
	if now.Sub(d.fullScan) >= fullScanEvery || now.Before(d.fullScan) {
		d.fullScan = now
		return ""
	}
	return d.at
}

// done ends a scan, raising the floor to at, the earliest entry it left in place ("" for none,
// as after a failed scan), capped by the writes it may not have seen.
func (f *dueFloors) done(namespace string, at string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.get(namespace)
	if at = min(at, d.capAt); at > d.at {
		d.at = at
	}
	d.scans--
}

// lower makes sure a due entry written at t in txn is at or above the floor, and at or above
// what the scans in progress raise it to.
func (f *dueFloors) lower(txn *badger.Txn, namespace string, t time.Time) {
	at := floorAt(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lowerTo(namespace, at)
	if f.inTxn == nil {
		f.inTxn = map[*badger.Txn]map[string]string{}
	}
	dues := f.inTxn[txn]
	if dues == nil {
		dues = map[string]string{}
		f.inTxn[txn] = dues
	}
	if prev, ok := dues[namespace]; !ok || at < prev {
		dues[namespace] = at
	}
}

// lowerAfter lowers the floor, and what the scans in progress raise it to, to a due entry at t
// that is committed: for an entry that scans pass over until later (an Update's, while its lease
// is in the lease table).
func (f *dueFloors) lowerAfter(namespace string, t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lowerTo(namespace, floorAt(t))
}

func (f *dueFloors) lowerTo(namespace, at string) {
	d := f.get(namespace)
	d.at = min(d.at, at)
	if d.scans > 0 {
		d.capAt = min(d.capAt, at)
	}
}

// reset makes the next scan of namespace start from the beginning.
func (f *dueFloors) reset(namespace string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.get(namespace)
	d.at = ""
	if d.scans > 0 {
		d.capAt = ""
	}
}

// settle forgets txn's writes once it is committed or discarded.
func (f *dueFloors) settle(txn *badger.Txn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.inTxn, txn)
}

// seekKey is the due-index key at which a scan from floor begins.
func seekKey(prefix []byte, floor string) []byte {
	return append(append([]byte(nil), prefix...), floor...)
}
