package badgerstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// maxGroup caps the requests of one group commit. Requests pile up while
// the previous group is being written and synced, and a group is everything
// queued by then; the cap bounds the CPU one group spends before its sync
// (an Accept costs the committer ~7 µs and Badger's writer ~11 µs), and so
// the latency added to the first request in it.
const maxGroup = 128

// errClosed is returned to a request made after Close.
var errClosed = errors.New("store is closed")

// committer is the store's only writer. Callers hand it a function that
// reads and writes in a transaction (the read-check-write of one Claim,
// Accept, ...); it applies the queued functions one after another in a
// single Badger transaction and commits that once, so a group of requests
// shares one write and one sync (the DB has SyncWrites on: the commit
// returns once the WAL and value log are synced). Each request keeps its
// own outcome, as if applied alone in queue order: a later function sees
// the writes of earlier ones in the group, and one that fails is taken out
// of the group without leaving writes behind.
//
// Being the only writer also makes every read-check-write atomic without
// conflict detection: no other write can come between a request's reads and
// its writes. (Badger's value-log GC writes too, beside the groups once a
// rewrite has started (gc.go), and only moves values it keeps, under their old
// versions; it changes nothing a request reads.)
//
// A group is applied only after the previous one's commit returned: Badger
// makes a new transaction wait for every commit in flight anyway, so that
// its reads see them. Applying the next group on an older snapshot while one
// is synced, and relying on conflict detection, was tried: groups got
// smaller (so more syncs per request, which is what costs), and the
// requests' answers had to be validated for snapshots older than writes
// their callers had already seen.
type committer struct {
	db *badger.DB
	// failed is set by the first commit that fails, here or as logged by
	// Badger; from then on every request fails (failure.go).
	failed *failure
	// commitTxn commits a group's transaction: (*badger.Txn).Commit, which
	// tests replace to inject a failure.
	commitTxn func(*badger.Txn) error
	// settled is told of every transaction once it is committed or discarded, so the backlog
	// counts follow what was committed (outbox_pending.go).
	settled func(txn *badger.Txn, committed bool)

	// writing is held while a group is applied and committed; exclusive holds it to keep the
	// committer out of Badger while Badger refuses writes (reclaim.go) or rewrites a value-log
	// file (gc.go).
	writing sync.Mutex

	mu     sync.Mutex
	wake   sync.Cond // signalled when queue grows or closed is set
	queue  []*request
	closed bool
	exited chan struct{}

	// groups counts commits (each is one WAL sync and one value-log sync),
	// for the benchmarks' syncs-per-request figure.
	groups atomic.Int64
	// observer, if set, is told of each commit (commit_observer.go).
	observer atomic.Pointer[CommitObserver]

	// view is what Claims read, published after each commit (commit_view.go).
	view claimView
	// writes are the writes queued or in flight, by the keys they declare (commit_writes.go).
	writes *pendingWrites
}

// request is one caller's transaction function awaiting its group.
type request struct {
	fn    func(*badger.Txn) error
	state atomic.Int32 // reqQueued, reqTaken by the committer or reqCancelled by the caller
	done  chan error   // receives the outcome once; buffered so the committer never waits
}

const (
	reqQueued int32 = iota
	reqTaken
	reqCancelled
)

func startCommitter(db *badger.DB, failed *failure, settled func(*badger.Txn, bool)) *committer {
	c := &committer{db: db, failed: failed, commitTxn: (*badger.Txn).Commit, settled: settled, exited: make(chan struct{})}
	c.wake.L = &c.mu
	c.writes = newPendingWrites()
	c.view.publish(db)
	go c.run()
	return c
}

// do runs fn in the next group and returns its error, or the group's commit
// error, once the group is committed and synced. fn may run more than once
// (see commit) and must set its results afresh each time. If ctx ends while
// the request is still queued, do returns ctx's error and fn never takes
// effect; once the committer has taken it, do waits for the commit, which
// is at most one group away. Of the kinds of keys Claims read, fn writes only
// those in ks (commit_writes.go).
func (c *committer) do(ctx context.Context, ks claimKeys, fn func(*badger.Txn) error) error {
	// Registered from before it is queued until after its group's snapshot is published.
	c.writes.begin(&ks)
	defer c.writes.end(&ks)
	r := &request{fn: fn, done: make(chan error, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClosed
	}
	c.queue = append(c.queue, r)
	c.wake.Signal()
	c.mu.Unlock()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqQueued, reqCancelled) {
			return ctx.Err()
		}
		return <-r.done
	}
}

// exclusive runs fn between two groups: no group is applied or committed meanwhile (requests
// queue up, and go on once fn returns).
func (c *committer) exclusive(fn func() error) error {
	c.writing.Lock()
	defer c.writing.Unlock()
	return fn()
}

// startPoll is how often exclusiveStart checks whether fn is past its start.
const startPoll = 500 * time.Microsecond

// exclusiveStart runs fn with the committer kept out until started reports true
// (polled every startPoll) or fn returns, whichever comes first; groups are then
// applied and committed beside the rest of fn. A nil started keeps the committer
// out for all of fn, as exclusive does.
func (c *committer) exclusiveStart(fn func() error, started func() bool) error {
	if started == nil {
		return c.exclusive(fn)
	}
	c.writing.Lock()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	tick := time.NewTicker(startPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			c.writing.Unlock()
			return err
		case <-tick.C:
			if started() {
				c.writing.Unlock()
				return <-done
			}
		}
	}
}

// close refuses new requests, waits until the queued ones are committed (so
// none of their callers hangs, and none is told "closed" for a write that
// then happens), stops the committer and unpublishes the Claims' snapshot,
// which must be discarded before Badger closes. It may be called more than once.
func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	c.wake.Broadcast()
	c.mu.Unlock()
	<-c.exited
	c.view.close()
}

func (c *committer) run() {
	defer close(c.exited)
	for {
		group := c.next()
		if group == nil {
			return
		}
		c.writing.Lock()
		c.commit(group)
		c.writing.Unlock()
	}
}

// next waits for requests and takes up to maxGroup of them, skipping those
// their callers cancelled; nil means closed with nothing left to do.
func (c *committer) next() []*request {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.queue) == 0 {
			if c.closed {
				return nil
			}
			c.wake.Wait()
		}
		n := min(len(c.queue), maxGroup)
		var group []*request
		for _, r := range c.queue[:n] {
			if r.state.CompareAndSwap(reqQueued, reqTaken) {
				group = append(group, r)
			}
		}
		// Copy the rest down rather than reslice, so the queue's array does
		// not keep growing at its end while its head is dropped.
		rest := copy(c.queue, c.queue[n:])
		clear(c.queue[rest:])
		c.queue = c.queue[:rest]
		if len(group) > 0 {
			return group
		}
	}
}

// commit applies and commits group, in as few transactions as it takes,
// and hands every request its outcome.
func (c *committer) commit(group []*request) {
	for len(group) > 0 {
		n, failed, err := c.try(group)
		if failed >= 0 {
			// The failed request's partial writes went with the discarded
			// transaction; the others go round again without it. Those
			// before it redo the same work on the same state, which is
			// cheaper than making every request undo-able.
			group[failed].done <- err
			group = slices.Delete(group, failed, failed+1)
			continue
		}
		for _, r := range group[:n] {
			r.done <- err
		}
		group = group[n:]
	}
}

// try applies group in order in one transaction. If every request's
// function succeeds, it commits and returns len(group), -1 and the commit's
// error, or the store's failure if Badger logged one meanwhile (either fails
// the store, see failure.go; a failed store applies nothing). If one fails,
// it discards the transaction and returns 0, its index
// and its error; except that a request that does not fit in the transaction
// (ErrTxnTooBig) after others did is left for the next one, and the
// requests before it are committed alone: n < len(group).
// (Badger reserves room for the commit's own marker entry from the start,
// so a group whose entries fit also commits.)
func (c *committer) try(group []*request) (n, failed int, err error) {
	if err := c.failed.get(); err != nil {
		return len(group), -1, err
	}
	txn := c.db.NewTransaction(true)
	committed := false
	defer func() {
		txn.Discard()
		c.settled(txn, committed)
	}()
	for i, r := range group {
		err := r.fn(txn)
		if err == nil {
			continue
		}
		txn.Discard()
		if i > 0 && errors.Is(err, badger.ErrTxnTooBig) {
			return c.try(group[:i])
		}
		return 0, i, err
	}
	c.groups.Add(1)
	start := time.Now()
	if err := c.commitTxn(txn); err != nil {
		c.failed.fail(redact(err))
	} else {
		committed = true
	}
	c.observe(start, len(group))
	if committed {
		// Before the group's callers are answered, so that a caller's next Claim sees its write.
		c.view.publish(c.db)
	}
	return len(group), -1, c.failed.get()
}
