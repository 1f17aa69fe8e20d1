package badgerstore

import (
	"encoding/binary"
	"sync"
	"time"
)

// A Lease deletes the due-index entries it takes, and Badger keeps deleted keys as tombstones
// until compaction; a scan from the start of the index walks over all of them, so leasing from a
// large backlog got slower with every event delivered. The floor is where a namespace's scan
// starts instead: the earliest entry the last committed scan left in place.
//
// Writes are serialized by the committer and never write a due entry in the past (see store),
// so nothing is written below a floor once it is raised. Writes lower it all the same, and every
// fullScanEvery a scan starts from the beginning again, so that a wall clock stepping back (or
// the per-transaction mode the benchmarks compare with) can delay an event, never lose it.
const fullScanEvery = 30 * time.Second

// dueFloors holds each namespace's floor (sortNanos) and when its last full scan was.
type dueFloors struct {
	mu sync.Mutex
	ns map[string]*dueFloor
}

type dueFloor struct {
	at       uint64
	fullScan time.Time
}

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

// start is where a Lease's scan of namespace begins: the floor, or 0 when a full scan is due.
func (f *dueFloors) start(namespace string, now time.Time) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.get(namespace)
	if now.Sub(d.fullScan) >= fullScanEvery || now.Before(d.fullScan) {
		d.fullScan = now
		return 0
	}
	return d.at
}

// raise moves the floor up to the earliest entry a committed scan left in place.
func (f *dueFloors) raise(namespace string, at uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.get(namespace); at > d.at {
		d.at = at
	}
}

// lower makes sure a due entry written at t is at or above the floor.
func (f *dueFloors) lower(namespace string, t time.Time) {
	at := sortNanos(t)
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.get(namespace); at < d.at {
		d.at = at
	}
}

// seekKey is the due-index key at which a scan from floor begins.
func seekKey(prefix []byte, floor uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), floor)
}
