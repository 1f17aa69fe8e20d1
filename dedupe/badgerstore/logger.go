package badgerstore

import (
	"errors"
	"fmt"
	"log"
	"slices"
)

// storeLogger is one store's Badger logger. It hands Badger's warnings and
// errors to the standard logger (which Caddy redirects into its own log),
// without the bytes of keys and values, and drops its chatty Info/Debug
// lines, which report routine compactions and replays.
//
// It is also how the store hears of the write failures Badger only logs:
// those fail the store (failure.go).
type storeLogger struct {
	failed *failure
}

// fatalWrites are the formats of Badger's Errorf lines that report a write
// the disk may not have kept (badger v4's value.go and db.go):
//   - a failed value-log sync, which Badger only logs: the commit still
//     succeeds, its WAL entry is synced after and points at the unsynced
//     value-log bytes;
//   - a failed write request (value-log write, memtable or WAL write, WAL
//     sync, a new memtable), which is also returned to its transactions'
//     Commit, but not to value-log GC's rewrites, whose batch writes report
//     it only here.
//
// Other errors are logged and left to Badger, as they lose nothing that was
// synced: a memtable flush that fails is retried, and the WAL holds the
// memtable until it succeeds; a failed compaction leaves the tables it was
// merging in place; failing to delete a flushed WAL or to read value-log
// statistics, and read errors, which the reader gets too.
var fatalWrites = []string{
	"Error while curlf sync: %v\n",
	"writeRequests: %v",
}

func (l *storeLogger) Errorf(f string, a ...any) {
	msg, _ := withoutDumps(fmt.Sprintf(f, a...))
	if slices.Contains(fatalWrites, f) {
		l.failed.fail(errors.New(msg))
	}
	log.Print("badger: ERROR: " + msg)
}

func (l *storeLogger) Warningf(f string, a ...any) {
	msg, _ := withoutDumps(fmt.Sprintf(f, a...))
	log.Print("badger: WARNING: " + msg)
}

func (l *storeLogger) Infof(string, ...any)  {}
func (l *storeLogger) Debugf(string, ...any) {}
