package badgerstore

import (
	"context"
	"hash/maphash"
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
}

// pendingWrites tracks the writes queued or in flight on the committer, so that a Claim reading
// the published snapshot (commit_view.go) first waits for every one that may write a key it
// reads. Without that, a Claim of an entity's version 4, arriving while the Done of its version
// 5 (already sent to the app) is queued or being synced, would read the snapshot before it,
// get Claimed, and the app would receive version 4 after 5; and a replay of a body under a
// fresh ID would pass while the first delivery's digest is being written.
//
// Entries live only while their writes are queued or in flight, so the table is bounded by the
// queue.
type pendingWrites struct {
	seed maphash.Seed
	mu   sync.Mutex
	keys map[uint64]pendingKey
}

// pendingKey counts the writes of one key hash; free, made when a Claim waits, is closed when
// the count reaches zero.
type pendingKey struct {
	n    int
	free chan struct{}
}

func newPendingWrites() *pendingWrites {
	return &pendingWrites{seed: maphash.MakeSeed(), keys: make(map[uint64]pendingKey)}
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
	for _, h := range ks.h[:ks.n] {
		e := p.keys[h]
		e.n++
		p.keys[h] = e
	}
}

// end unregisters a write that begin registered, once its outcome is known: committed and
// published, failed, or cancelled before it was taken.
func (p *pendingWrites) end(ks *claimKeys) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range ks.h[:ks.n] {
		e := p.keys[h]
		if e.n--; e.n > 0 {
			p.keys[h] = e
			continue
		}
		delete(p.keys, h)
		if e.free != nil {
			close(e.free)
		}
	}
}

// await returns once no write of any of ks is queued or in flight.
func (p *pendingWrites) await(ctx context.Context, ks *claimKeys) error {
	for {
		free := p.busy(ks)
		if free == nil {
			return nil
		}
		select {
		case <-free:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// busy returns a channel closed once the writes of one of ks pending now are done, or nil if
// none is pending.
func (p *pendingWrites) busy(ks *claimKeys) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range ks.h[:ks.n] {
		e, ok := p.keys[h]
		if !ok {
			continue
		}
		if e.free == nil {
			e.free = make(chan struct{})
			p.keys[h] = e
		}
		return e.free
	}
	return nil
}
