package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// Value-log GC runs while requests commit. Rewriting a file reads the version Badger's writer
// goroutine sets for each write it applies; under the race detector (go test -race) the test
// fails if the two are not kept apart.
func TestValueLogGCDoesNotRaceCommits(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	// Bodies above the value threshold go to the value log: 3000 of 8 KiB fill three files.
	const events = 3000
	body := bytes.Repeat([]byte("x"), 8<<10)
	acceptAndDeliver(t, b, events, body)
	// Flush and compact, as Reclaim does, so that Badger counts the delivered bodies as garbage
	// and their files qualify for a rewrite.
	if err := b.update(ctx, "reclaim", func(txn *badger.Txn) error { return txn.Set(reclaimKey, nil) }); err != nil {
		t.Fatal(err)
	}
	if err := b.commits.exclusive(func() error { return b.db.DropPrefix(reclaimKey) }); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	committing := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for i := 0; ; i++ {
			ev := queued(fmt.Sprintf("during-gc-%05d", i), base)
			ev.Body = body
			if _, err := b.Accept(ctx, dedupe.Claim{Namespace: ev.Namespace}, ev, time.Hour); err != nil {
				errs <- err
				return
			}
			if i == 0 {
				close(committing)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	<-committing
	rewritten := 0
	for {
		err := b.collectGarbage()
		if errors.Is(err, badger.ErrNoRewrite) {
			break
		}
		if err != nil {
			close(stop)
			t.Fatalf("value-log GC: %v", err)
		}
		rewritten++
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatalf("accept during value-log GC: %v", err)
	}
	if rewritten == 0 {
		t.Fatal("no value-log file qualified for GC: the test exercised nothing")
	}
	t.Logf("value-log files rewritten while accepts committed: %d", rewritten)
}

// The pinned Badger has the flag collectGarbage waits for; without it, every value-log rewrite
// would keep the committer out until it ends (a Badger upgrade that renames it fails here).
func TestBadgerSaysWhenAValueLogRewriteIsInFlight(t *testing.T) {
	b := openTest(t)
	if b.rewriting == nil {
		t.Fatal("badger.DB has no gcActive flag of type atomic.Bool: value-log GC would hold the committer for whole rewrites")
	}
	if b.rewriting() {
		t.Fatal("a rewrite is reported in flight in an idle store")
	}
}

// Requests commit while a value-log rewrite runs, once it has started: the committer is kept out
// only until then, not for the rewrite's lookups and write-back.
func TestCommitsGoOnOnceAValueLogRewriteHasStarted(t *testing.T) {
	b := openTest(t)
	var started atomic.Bool
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- b.commits.exclusiveStart(func() error { started.Store(true); close(inside); <-release; return nil }, started.Load)
	}()
	<-inside
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev := queued("during-rewrite", base)
	if _, err := b.Accept(ctx, dedupe.Claim{Namespace: ev.Namespace}, ev, time.Hour); err != nil {
		t.Fatalf("accept while a started rewrite runs: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Until the rewrite has started, no request commits: the rewrite's read of Badger's newest
// version comes after the last commit's write and before the next.
func TestNoCommitBeforeAValueLogRewriteHasStarted(t *testing.T) {
	b := openTest(t)
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- b.commits.exclusiveStart(func() error { close(inside); <-release; return nil }, func() bool { return false })
	}()
	<-inside
	ev := queued("before-start", base)
	accepted := make(chan error, 1)
	go func() {
		_, err := b.Accept(context.Background(), dedupe.Claim{Namespace: ev.Namespace}, ev, time.Hour)
		accepted <- err
	}()
	select {
	case err := <-accepted:
		t.Fatalf("an accept committed before the rewrite started (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("accept after the rewrite: %v", err)
	}
}

// A failed store rewrites no value-log file, though files qualify: it writes nothing until it is
// reopened.
func TestAFailedStoreRewritesNoValueLogFile(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	acceptAndDeliver(t, b, 3000, bytes.Repeat([]byte("x"), 8<<10))
	if err := b.update(ctx, "reclaim", func(txn *badger.Txn) error { return txn.Set(reclaimKey, nil) }); err != nil {
		t.Fatal(err)
	}
	if err := b.commits.exclusive(func() error { return b.db.DropPrefix(reclaimKey) }); err != nil {
		t.Fatal(err)
	}

	failCommitsAfterApplying(b)
	ev := queued("after-the-failure", base)
	if _, err := b.Accept(ctx, dedupe.Claim{Namespace: ev.Namespace}, ev, time.Hour); err == nil {
		t.Fatal("Accept whose commit failed: no error")
	}
	if err := b.collectGarbage(); !errors.Is(err, ErrStoreFailed) {
		t.Fatalf("value-log GC of a failed store: %v, want %v", err, ErrStoreFailed)
	}

	// The same files qualify once the store works: the check above tested a rewrite that was due.
	b.failed = &failure{}
	b.commits.failed = b.failed
	b.commits.commitTxn = (*badger.Txn).Commit
	if err := b.collectGarbage(); err != nil {
		t.Fatalf("value-log GC of the working store: %v, want a file rewritten", err)
	}
}
