package badgerstore

import (
	"context"
	"hash/maphash"
	"slices"
	"sync"
)

// maxClaimKeys is how many keys a Claim reads: its event ID's, its digest's and its entity
// version's (keys).
const maxClaimKeys = 3

// claimKeys are the hashes of the keys a Claim reads, or of those a write writes of the kinds
// Claims read (event IDs, digests and entity versions: only Done and Accept write those); the
// zero value is a write of none of them. Hashes, not keys, so declaring costs no allocation; two
// keys of one hash only make a Claim wait for a write it did not need to.
type claimKeys struct {
	h [maxClaimKeys]uint64
	n int
	// in are the cohorts a write joined, by key (begin), for end to leave.
	in [maxClaimKeys]*cohort
}

// pendingWrites tracks the writes queued or in flight on the committer, so that a Claim reading
// the published snapshot (commit_view.go) first waits for every one that may write a key it
// reads. Without that, a Claim of an entity's version 4, arriving while the Done of its version
// 5 (already sent to the app) is queued or being synced, would read the snapshot before it,
// get Claimed, and the app would receive version 4 after 5; and a replay of a body under a
// fresh ID would pass while the first delivery's digest is being written.
//
// A Claim waits only for the writes pending when it arrives: those that begin later are
// concurrent with it, and waiting for them too would keep a Claim of a busy entity waiting for
// as long as its Dones overlap, up to every request of the entity then in the app. So the
// writes of a key are grouped in cohorts: a waiting Claim seals the key's cohorts, and later
// writes start a new one.
//
// Entries live only while their writes are queued or in flight, and every cohort holds one
// at least, so the table is bounded by the queue.
type pendingWrites struct {
	seed maphash.Seed
	mu   sync.Mutex
	// keys holds each key hash's cohorts with writes pending, oldest first; only the newest
	// may be open.
	keys map[uint64][]*cohort
}

// cohort is writes of one key hash that began while no Claim waited for the key.
type cohort struct {
	n int // its writes still pending
	// done, made when a Claim seals the cohort, is closed once n reaches zero. A sealed
	// cohort takes no more writes.
	done chan struct{}
}

func newPendingWrites() *pendingWrites {
	return &pendingWrites{seed: maphash.MakeSeed(), keys: make(map[uint64][]*cohort)}
}

// of returns the claimKeys of a Claim's dedupe keys ids and version key vk (either may be nil).
func (p *pendingWrites) of(ids [][]byte, vk []byte) claimKeys {
	var ks claimKeys
	for _, k := range ids {
		ks.h[ks.n] = maphash.Bytes(p.seed, k)
		ks.n++
	}
	if vk != nil {
		ks.h[ks.n] = maphash.Bytes(p.seed, vk)
		ks.n++
	}
	return ks
}

// begin registers a write of ks, before it is queued.
func (p *pendingWrites) begin(ks *claimKeys) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range ks.h[:ks.n] {
		cs := p.keys[h]
		if len(cs) == 0 || cs[len(cs)-1].done != nil {
			cs = append(cs, &cohort{})
			p.keys[h] = cs
		}
		c := cs[len(cs)-1]
		c.n++
		ks.in[i] = c
	}
}

// end unregisters a write that begin registered, once its outcome is known: committed and
// published, failed, or cancelled before it was taken.
func (p *pendingWrites) end(ks *claimKeys) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range ks.h[:ks.n] {
		c := ks.in[i]
		if c.n--; c.n > 0 {
			continue
		}
		if c.done != nil {
			close(c.done)
		}
		cs := p.keys[h]
		j := slices.Index(cs, c)
		cs = slices.Delete(cs, j, j+1)
		if len(cs) == 0 {
			delete(p.keys, h)
		} else {
			p.keys[h] = cs
		}
	}
}

// await returns once no write of any of ks that is queued or in flight now is.
func (p *pendingWrites) await(ctx context.Context, ks *claimKeys) error {
	for _, done := range p.seal(ks) {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// seal returns channels that are all closed once the writes of ks pending now have ended, and
// makes later writes of those keys start new cohorts.
func (p *pendingWrites) seal(ks *claimKeys) []chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	var dones []chan struct{}
	for _, h := range ks.h[:ks.n] {
		for _, c := range p.keys[h] {
			if c.done == nil {
				c.done = make(chan struct{})
			}
			dones = append(dones, c.done)
		}
	}
	return dones
}
