package badgerstore

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

var errInjected = errors.New("injected: WAL sync failed")

// failCommitsAfterApplying makes every group commit of b return an error after
// Badger has applied its writes to the memtable, as a failed WAL sync does.
func failCommitsAfterApplying(b *Store) {
	b.commits.commitTxn = func(txn *badger.Txn) error {
		if err := txn.Commit(); err != nil {
			return err
		}
		return errInjected
	}
}

func TestFailedCommitFailsTheStoreUntilReopened(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claimed := event("evt_sync")
	expect(t, "claim before the failure", claim(t, b, claimed), dedupe.Claimed)

	failCommitsAfterApplying(b)
	if _, err := b.Accept(ctx, event("evt_async"), queued("evt_async", base), time.Hour); err == nil {
		t.Fatal("Accept whose commit failed: no error")
	}
	// The disk is back, but the failed group's writes are in Badger's
	// memtable: a store that kept reading it would answer the provider's
	// retry "duplicate" for a write the disk never kept.
	b.commits.commitTxn = (*badger.Txn).Commit
	if out, err := b.Claim(ctx, event("evt_async")); err == nil {
		t.Fatalf("Claim of the failed Accept's ID: %v, want an error until the store is reopened", out)
	}
	if out, err := b.Accept(ctx, event("evt_async"), queued("evt_async", base), time.Hour); err == nil {
		t.Fatalf("retried Accept after a failed commit: %v, want an error until the store is reopened", out)
	}
	if err := b.Done(ctx, claimed, time.Hour); err == nil {
		t.Fatal("Done on a failed store: no error")
	}
	if out, err := b.Claim(ctx, event("evt_new")); err == nil {
		t.Fatalf("Claim on a failed store: %v, want an error", out)
	}
	if _, err := b.Get(ctx, "stripe", "evt_async"); err == nil {
		t.Fatal("Get on a failed store: no error")
	}
	if _, err := b.Lease(ctx, "stripe", base.Add(time.Hour), 10, time.Minute); err == nil {
		t.Fatal("Lease on a failed store: no error")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, the store answers from what is on disk. Badger's Close wrote
	// its memtable out, so the failed Accept's event is now durably queued:
	// the retry is a duplicate, and the event is there to be delivered.
	b, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	out, err := b.Accept(ctx, event("evt_async"), queued("evt_async", base), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "retried Accept after reopening", out, dedupe.Duplicate)
	if ev, err := b.Get(ctx, "stripe", "evt_async"); err != nil || ev.State != dedupe.Pending {
		t.Fatalf("the duplicate's event after reopening: %+v, %v; want it pending", ev, err)
	}
	expect(t, "new ID after reopening", claim(t, b, event("evt_new")), dedupe.Claimed)
}

// A commit that fails before Badger applies anything leaves nothing behind:
// after reopening, the ID is new.
func TestCommitFailingBeforeApplyLeavesIDNew(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b.commits.commitTxn = func(*badger.Txn) error { return errInjected }
	ctx := context.Background()
	if _, err := b.Accept(ctx, event("evt_lost"), queued("evt_lost", base), time.Hour); err == nil {
		t.Fatal("Accept whose commit failed: no error")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	out, err := b.Accept(ctx, event("evt_lost"), queued("evt_lost", base), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "Accept after reopening", out, dedupe.Claimed)
}

// Badger only logs a failed value-log sync (value.go, valueLog.write) and
// lets the commit succeed. The store's logger hears it while the group's
// Commit is under way; the group must fail, and so must what follows.
func TestLoggedValueLogSyncErrorFailsTheStore(t *testing.T) {
	b := openTest(t)
	var once sync.Once
	b.commits.commitTxn = func(txn *badger.Txn) error {
		err := txn.Commit()
		once.Do(func() { badgerLog(b).Errorf("Error while curlf sync: %v\n", syscall.EIO) })
		return err
	}
	ctx := context.Background()
	ev := queued("evt_vlog", base)
	ev.Body = make([]byte, 4<<10) // in the value log
	if _, err := b.Accept(ctx, event("evt_vlog"), ev, time.Hour); err == nil {
		t.Fatal("Accept whose value-log sync failed: no error (a 202 for a write the disk refused)")
	}
	if _, err := b.Accept(ctx, event("evt_next"), queued("evt_next", base), time.Hour); err == nil {
		t.Fatal("Accept after a value-log sync failure: no error")
	}
}

// A failed write request (logged by Badger's writer as "writeRequests: ...",
// which is also how value-log GC's rewrites report one) fails the store too.
func TestLoggedWriteRequestErrorFailsTheStore(t *testing.T) {
	b := openTest(t)
	badgerLog(b).Errorf("writeRequests: %v", syscall.EIO)
	if _, err := b.Claim(context.Background(), event("evt_after")); err == nil {
		t.Fatal("Claim after a failed write request: no error")
	}
}

// Errors Badger recovers from without losing a synced write leave the store
// working: a memtable flush it retries (the WAL still holds the memtable) and
// compactions (the tables they would replace stay in place).
func TestLoggedRecoverableErrorsKeepTheStore(t *testing.T) {
	b := openTest(t)
	badgerLog(b).Errorf("error flushing memtable to disk: %v, retrying", syscall.ENOSPC)
	badgerLog(b).Errorf("cannot start subcompaction: %+v", syscall.ENOSPC)
	badgerLog(b).Warningf("[Compactor: %d] LOG Compact FAILED with error: %+v: %+v", 0, syscall.ENOSPC, "cd")
	badgerLog(b).Warningf("While running doCompact: %v\n", syscall.ENOSPC)
	ctx := context.Background()
	if out, err := b.Accept(ctx, event("evt_ok"), queued("evt_ok", base), time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("Accept after recoverable errors: %v, %v", out, err)
	}
}

// badgerLog is the logger b's Badger database logs to.
func badgerLog(b *Store) badger.Logger {
	return b.db.Opts().Logger
}
