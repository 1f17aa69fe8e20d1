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
	// gen is, by key, the generation of the key's writes a write joined (begin), for end to leave.
	gen [maxClaimKeys]uint64
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
// as long as its Dones overlap, up to every request of the entity then in the app. So a waiting
// Claim seals the key's open writes into a cohort it waits for, and later writes start a new
// generation. Only sealing allocates: a write that no Claim waits for is a count.
//
// Entries live only while their writes are queued or in flight, and every cohort holds one
// at least, so the table is bounded by the queue.
type pendingWrites struct {
	seed maphash.Seed
	mu   sync.Mutex
	keys map[uint64]keyWrites
}

// keyWrites are the pending writes of one key hash: open counts those of generation gen, begun
// since a Claim last waited for the key; sealed holds the earlier ones, oldest first.
type keyWrites struct {
	gen    uint64
	open   int
	sealed []*cohort
}

// cohort is the writes of one key hash and generation that a waiting Claim sealed; done is
// closed once the last of them (n) has ended.
type cohort struct {
	gen  uint64
	n    int
	done chan struct{}
}

func newPendingWrites() *pendingWrites {
	return &pendingWrites{seed: maphash.MakeSeed(), keys: make(map[uint64]keyWrites)}
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
		e := p.keys[h]
		e.open++
		ks.gen[i] = e.gen
		p.keys[h] = e
	}
}

// end unregisters a write that begin registered, once its outcome is known: committed and
// published, failed, or cancelled before it was taken. (An entry is deleted only with no write
// pending, so no write holds a generation of an entry made again since.)
func (p *pendingWrites) end(ks *claimKeys) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range ks.h[:ks.n] {
		e := p.keys[h]
		if ks.gen[i] == e.gen {
			e.open--
		} else {
			j := slices.IndexFunc(e.sealed, func(c *cohort) bool { return c.gen == ks.gen[i] })
			c := e.sealed[j]
			if c.n--; c.n == 0 {
				close(c.done)
				e.sealed = slices.Delete(e.sealed, j, j+1)
			}
		}
		if e.open == 0 && len(e.sealed) == 0 {
			delete(p.keys, h)
		} else {
			p.keys[h] = e
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
// makes later writes of those keys start a new generation.
func (p *pendingWrites) seal(ks *claimKeys) []chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	var dones []chan struct{}
	for _, h := range ks.h[:ks.n] {
		e, ok := p.keys[h]
		if !ok {
			continue
		}
		if e.open > 0 {
			e.sealed = append(e.sealed, &cohort{gen: e.gen, n: e.open, done: make(chan struct{})})
			e.gen++
			e.open = 0
			p.keys[h] = e
		}
		for _, c := range e.sealed {
			dones = append(dones, c.done)
		}
	}
	return dones
}
