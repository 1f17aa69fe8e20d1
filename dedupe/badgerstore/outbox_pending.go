package badgerstore

import (
	"context"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// pendingCounts is each namespace's backlog: its number of Pending events, leased or not. It is
// kept in memory so that Accept can bound a backlog (Claim.MaxPending) and operators can read it
// without a scan per request: counted from the state index when the store opens, then moved by
// every write that makes an event Pending or takes it out of Pending (store).
//
// A write's move counts only once its transaction commits. Until then it is held against the
// transaction: the later requests of the same group commit see it (they are applied after it,
// in the same transaction), and it goes with the transaction when a group is discarded and
// applied again without a failed request (commit.go). As the committer applies Accepts one at
// a time, the check against the bound and the move are one step: concurrent Accepts never take
// a backlog past its bound.
type pendingCounts struct {
	mu        sync.Mutex
	committed map[string]int
	inTxn     map[*badger.Txn]map[string]int
}

// count is the namespace's backlog as txn sees it.
func (p *pendingCounts) count(txn *badger.Txn, namespace string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.committed[namespace] + p.inTxn[txn][namespace]
}

// moved records, in txn, that an event of namespace went from old (nil for none) to rec.
func (p *pendingCounts) moved(txn *badger.Txn, namespace string, old, rec *outboxRecord) {
	delta := 0
	if old != nil && old.State == dedupe.Pending {
		delta--
	}
	if rec.State == dedupe.Pending {
		delta++
	}
	if delta == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inTxn == nil {
		p.inTxn = map[*badger.Txn]map[string]int{}
	}
	if p.inTxn[txn] == nil {
		p.inTxn[txn] = map[string]int{}
	}
	p.inTxn[txn][namespace] += delta
}

// settle applies txn's moves if it committed and forgets them either way.
func (p *pendingCounts) settle(txn *badger.Txn, committed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if committed {
		if p.committed == nil {
			p.committed = map[string]int{}
		}
		for ns, delta := range p.inTxn[txn] {
			p.committed[ns] += delta
		}
	}
	delete(p.inTxn, txn)
}

// countPending sets every namespace's backlog from the state index, at open, before any other
// write can run.
func (b *Store) countPending() error {
	counts, err := b.PendingByNamespace(context.Background())
	if err != nil {
		return err
	}
	b.pending.mu.Lock()
	defer b.pending.mu.Unlock()
	b.pending.committed = counts
	return nil
}

// Pending is the namespace's backlog: its number of undelivered (Pending) events, being
// attempted or not, as of the last commit. It reads a counter, not the ledger.
func (b *Store) Pending(namespace string) int {
	b.pending.mu.Lock()
	defer b.pending.mu.Unlock()
	return b.pending.committed[namespace]
}
