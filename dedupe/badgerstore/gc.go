package badgerstore

import (
	"errors"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Badger keeps values of ValueThreshold bytes or more (queued bodies, see
// Open) in its value log, and reclaims the space of deleted, expired or
// overwritten ones only when asked to. These set how often it is asked.
const (
	// gcInterval is how often the value log is checked for reclaimable files.
	// A delivered event's body is dropped at once (see shed), so in async
	// mode most of a value-log file is garbage soon after it is written; at
	// 5 minutes, disk use swung by 5 minutes of traffic (1.3 KiB an event).
	// A check that finds nothing to rewrite only reads Badger's discard
	// statistics.
	gcInterval = time.Minute
	// gcDiscardRatio is the share of a value-log file that must be garbage
	// before it is rewritten; Badger recommends 0.5, a lifetime write
	// amplification of 2.
	gcDiscardRatio = 0.5
)

// collector runs value-log garbage collection in the background until stopped.
type collector struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// startCollector starts collecting garbage every gcInterval, by calling step
// (Badger.collectGarbage).
func startCollector(step func() error, log badger.Logger) *collector {
	c := &collector{stop: make(chan struct{}), done: make(chan struct{})}
	go c.run(step, log)
	return c
}

func (c *collector) run(step func() error, log badger.Logger) {
	defer close(c.done)
	tick := time.NewTicker(gcInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		// Each successful run rewrites one file; go on while files qualify.
		for {
			err := step()
			if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
				break
			}
			if err != nil {
				log.Warningf("value log GC: %v", err)
				break
			}
			select {
			case <-c.stop:
				return
			default:
			}
		}
	}
}

// close stops the collector and waits for a run in progress to finish. It
// may be called more than once.
func (c *collector) close() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
}

// collectGarbage rewrites at most one value-log file that qualifies, or
// returns badger.ErrNoRewrite (or ErrRejected while another runs), with the
// committer kept out: a rewrite reads the newest version in the memtable
// (DB.MaxVersion) under a lock Badger's writer does not take when it sets
// it, a data race. Between groups no write is in flight, and the lock of
// exclusive orders the rewrite's read after the last commit's write. Commits
// queue meanwhile: for a rewrite, 10-25 ms for a file of delivered bodies and
// up to ~85 ms for one still 45% live (measured on a shared 2-core VM); a
// call that finds no file to rewrite only reads Badger's discard statistics
// (µs). The collector's next call waits behind the committer, which has
// waited longer (sync.Mutex hands over to a waiter after 1 ms).
func (b *Store) collectGarbage() error {
	return b.commits.exclusive(func() error { return b.db.RunValueLogGC(gcDiscardRatio) })
}
