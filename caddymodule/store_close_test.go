package caddymodule

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
)

// The pool closes a store (Destruct when the last config lets go, or retire after a failure)
// while a reader it handed the store to still reads it: warnStranded's start-time scan, an admin
// listing. Badger's Close munmaps the tables under the reader's iterator, which is a fatal
// SIGSEGV of the whole process, not an error. The scenario runs in a child process so that the
// crash fails this test instead of killing the test binary.
func TestStoreClosedUnderAScanDoesNotCrash(t *testing.T) {
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
	l, err := dedupe.OpenBadger(dir)
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

	pool := newPooledLedger(dir, defaultMinFree)
	app := &App{routes: map[routeKey]*appRoute{}, logger: zap.NewNop()}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		app.warnStranded(pool, map[string]bool{})
	}()
	for opened := false; !opened; time.Sleep(time.Millisecond) {
		pool.mu.Lock()
		opened = pool.ledger != nil
		pool.mu.Unlock()
	}
	time.Sleep(50 * time.Millisecond) // the scan is under way
	if err := pool.Destruct(); err != nil {
		t.Log(err)
	}
	select {
	case <-scanned:
	case <-time.After(time.Minute):
		t.Fatal("the scan never ended")
	}
}
