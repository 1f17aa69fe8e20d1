package badgerstore

import (
	"sync"
	"time"
)

// claimTable holds sync mode's live claims in memory rather than in Badger. A claim only has to
// last while its request is in flight in this process: Badger locks its directory, so no other
// process shares the ledger, and a claim lost with the process is what a lapsed lease is anyway
// (the provider's retry goes through). Writing claims to Badger cost every sync-mode request a
// second synced write; now Done is its only one.
//
// A namespace is one route, in one mode, so a Claim and an Accept of one ID never race: Accept
// still refuses an ID claimed here (InFlight), checked in its transaction.
type claimTable struct {
	mu      sync.Mutex
	leases  map[string]time.Time // event key → lease end
	sweepAt int                  // size at which expired leases are swept out
}

// minSweep is the smallest table that is swept of leases whose holders never came back (a
// handler that panicked, say); sweeping at twice the size left keeps its cost amortized.
const minSweep = 1024

// take claims k until until, unless a live claim holds it.
func (t *claimTable) take(k []byte, now, until time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if end, ok := t.leases[string(k)]; ok && now.Before(end) {
		return false
	}
	if t.leases == nil {
		t.leases = make(map[string]time.Time)
	}
	if len(t.leases) >= max(t.sweepAt, minSweep) {
		for key, end := range t.leases {
			if !now.Before(end) {
				delete(t.leases, key)
			}
		}
		t.sweepAt = 2 * len(t.leases)
	}
	t.leases[string(k)] = until
	return true
}

// held reports whether a live claim holds k.
func (t *claimTable) held(k []byte, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	end, ok := t.leases[string(k)]
	return ok && now.Before(end)
}

// takeAll claims every key in ks until until, or none of them if a live claim holds any.
func (t *claimTable) takeAll(ks [][]byte, now, until time.Time) bool {
	for i, k := range ks {
		if !t.take(k, now, until) {
			t.dropAll(ks[:i])
			return false
		}
	}
	return true
}

// heldAny reports whether a live claim holds any key in ks.
func (t *claimTable) heldAny(ks [][]byte, now time.Time) bool {
	for _, k := range ks {
		if t.held(k, now) {
			return true
		}
	}
	return false
}

// dropAll ends the claims of every key in ks.
func (t *claimTable) dropAll(ks [][]byte) {
	for _, k := range ks {
		t.drop(k)
	}
}

// drop ends the claim of k.
func (t *claimTable) drop(k []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.leases, string(k))
}
