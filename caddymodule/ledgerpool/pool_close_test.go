package ledgerpool

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe/badgerstore"
)

// The pool closes a store (Destruct when the last config lets go, or retire after a failure)
// while a reader it handed the store to still reads it: warnStranded's start-time scan, an admin
// listing. Badger's Close munmaps the tables under the reader's iterator, which is a fatal
// SIGSEGV of the whole process, not an error. The scenario runs in a child process so that the
// crash fails this test instead of killing the test binary.
func TestStoreClosedUnderAScanDoesNotCrash(t *testing.T) {
	t.Parallel()
	if os.Getenv("HOOKGATE_CLOSE_CHILD") == "1" {
		closeUnderStrandedScan(t)
		return
	}
	self, err := os.Executable() // os.Args[0] is not ours: other tests run Caddy's CLI
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestStoreClosedUnderAScanDoesNotCrash$", "-test.v")
	cmd.Env = append(os.Environ(), "HOOKGATE_CLOSE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "unexpected fault address") && !strings.Contains(string(out), "SIGSEGV") {
		t.Fatalf("the child scenario failed (%v):\n%s", err, out)
	}
	if err != nil {
		text := string(out)
		if i := strings.Index(text, "unexpected fault address"); i >= 0 {
			text = text[i:min(len(text), i+200)]
		} else if len(text) > 1500 {
			text = text[:1500]
		}
		t.Fatalf("closing the pool's store while warnStranded scans it crashed the process (%v; stack through warnStranded: %v):\n%s",
			err, strings.Contains(string(out), "(*App).warnStranded"), text)
	}
}

func closeUnderStrandedScan(t *testing.T) {
	dir := t.TempDir()
	l, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	// A large backlog of pending events in a namespace (the state index is all the scan reads),
	// written straight into the directory so that the test is quick; Close leaves it in tables.
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithMemTableSize(4 << 20).WithValueThreshold(1 << 10))
	if err != nil {
		t.Fatal(err)
	}
	wb := db.NewWriteBatch()
	prefix := []byte("renamed\x00s\x00pending\x00")
	start := time.Now()
	for i := range 400_000 {
		k := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), uint64(start.UnixNano()+int64(i)))
		k = fmt.Appendf(k, "evt_%08d", i)
		if err := wb.Set(k, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := wb.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	opened, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	scan := &observedScan{store: &badgerStore{opened}, entered: make(chan struct{})}
	pool := newBadgerPool(BadgerTarget(dir), DefaultMinFree)
	pool.ledger = scan
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		pool.WarnStranded(zap.NewNop(), map[string]bool{})
	}()
	select {
	case <-scan.entered:
	case <-scanned:
		t.Fatal("WarnStranded ended without scanning the store")
	case <-time.After(time.Minute):
		t.Fatal("the scan never started")
	}
	scan.closing.Store(true)
	if err := pool.Destruct(); err != nil {
		t.Log(err)
	}
	select {
	case <-scanned:
	case <-time.After(time.Minute):
		t.Fatal("the scan never ended")
	}
	// The scan had its iterator open when Destruct began (scan.entered) and was still running
	// then: the store was closed under it, not before it started or after it ended.
	if !scan.closedUnder {
		t.Fatal("the scan ended before the store was closed, so nothing was closed under it")
	}
}

// observedScan reports when a PendingByNamespace scan is under way, and whether the store began
// closing before it ended. The scan checks its context once before it enters the store and then
// once per namespace with its iterator open, so the second check is the scan under way.
type observedScan struct {
	store
	entered     chan struct{}
	closing     atomic.Bool // set by the test just before it closes the store
	closedUnder bool
}

func (s *observedScan) PendingByNamespace(ctx context.Context) (map[string]int, error) {
	counts, err := s.store.PendingByNamespace(&scanContext{Context: ctx, entered: s.entered})
	s.closedUnder = s.closing.Load()
	return counts, err
}

// scanContext closes entered on the second call of Err.
type scanContext struct {
	context.Context
	entered chan struct{}
	calls   int
}

func (c *scanContext) Err() error {
	if c.calls++; c.calls == 2 {
		close(c.entered)
	}
	return c.Context.Err()
}
