package badgerstore

import "time"

// CommitObserver is told of each group commit, for metrics: how long Badger took to write and
// sync it, and how many requests (Claims' Dones, Accepts, Updates, ...) it held. It is called
// from the committer, between groups, and must return quickly.
type CommitObserver func(took time.Duration, requests int)

// ObserveCommits has the store tell fn of every group commit from now on.
func (b *Store) ObserveCommits(fn CommitObserver) {
	b.commits.observer.Store(&fn)
}

// observe tells the observer, if any, of a group of n requests whose commit began at start.
func (c *committer) observe(start time.Time, n int) {
	if fn := c.observer.Load(); fn != nil {
		(*fn)(time.Since(start), n)
	}
}
