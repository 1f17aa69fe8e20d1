package badgerstore

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
)

// ErrStoreFailed is wrapped by every error of a store that had a write fail.
// Such a store refuses everything until it is closed and opened again.
var ErrStoreFailed = errors.New("a write to the store failed; it must be reopened")

// failure holds the first write failure of a store. A failed commit can
// leave writes behind in Badger's memtable (it writes the memtable before it
// syncs the WAL), and a failed value-log sync leaves a synced WAL pointing at
// bytes the disk may not have: reads would then answer from writes the disk
// never kept, such as a "duplicate" for an event whose Accept was refused.
// So after a failure the store answers nothing until it is reopened, which
// reads back what the disk holds.
type failure struct {
	err atomic.Pointer[error]
}

// fail records cause, unless a failure is already recorded.
func (f *failure) fail(cause error) {
	err := fmt.Errorf("%w: %w", ErrStoreFailed, cause)
	f.err.CompareAndSwap(nil, &err)
}

// get returns the recorded failure, or nil.
func (f *failure) get() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Err returns nil while the store works, or, once a write failed, the error
// (wrapping ErrStoreFailed) with which it refuses every operation until it
// is closed and opened again.
func (b *Store) Err() error {
	return b.failed.get()
}

// badgerDumps are the markers after which Badger's error texts carry a key's
// or value's bytes: txn.Set's size errors ("Value with size 9437184
// exceeded 8388608 limit. Value:\n" and a hex dump of the value, which for
// a queued event holds its headers and body) and the writer's internal
// "Ptrs and Entries don't match: " followed by the whole request.
var badgerDumps = []string{" limit. Key:", " limit. Value:", "Ptrs and Entries don't match:"}

// withoutDumps cuts the bytes of keys and values out of a Badger error text.
func withoutDumps(msg string) (string, bool) {
	for _, marker := range badgerDumps {
		if i := strings.Index(msg, marker); i >= 0 {
			return msg[:i+len(marker)] + " [bytes withheld]", true
		}
	}
	return msg, false
}

// redact returns err, or an error of the same text without the bytes of keys
// or values if Badger put some in it, so that no log line of the caller
// carries a request's headers or body.
func redact(err error) error {
	if err == nil {
		return nil
	}
	if msg, cut := withoutDumps(err.Error()); cut {
		return errors.New(msg)
	}
	return err
}
