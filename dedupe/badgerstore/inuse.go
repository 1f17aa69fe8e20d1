package badgerstore

import (
	"sync"
	"sync/atomic"
)

// inUse keeps Close from closing the database under an operation that still reads it: Badger's
// Close unmaps its table and value-log files whatever iterators or reads are open, and a read of
// an unmapped page is a crash of the whole process (SIGSEGV), not an error. Every operation
// holds it shared while it touches the database, at the leaves only (update, view, Claim's
// read), so that it is never taken twice by one caller; Close takes it alone, after which every
// operation fails with errClosed.
type inUse struct {
	mu      sync.RWMutex
	closing atomic.Bool
	closed  bool
}

// enter lets an operation use the database until leave, or returns errClosed.
func (u *inUse) enter() error {
	if u.closing.Load() {
		return errClosed
	}
	u.mu.RLock()
	if u.closed {
		u.mu.RUnlock()
		return errClosed
	}
	return nil
}

func (u *inUse) leave() { u.mu.RUnlock() }

// close refuses new operations and waits for those in progress; long scans watch stopping and
// end early.
func (u *inUse) close() {
	u.closing.Store(true)
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
}

// stopping reports whether Close is waiting.
func (u *inUse) stopping() bool { return u.closing.Load() }
