package badgerstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Reclaim runs only while the disk is low, which is when writing a table is most likely to fail
// (no space, an I/O error). A Reclaim whose memtable flush fails must report it and leave the
// store failed (so the pool reopens it, with everything written before): not half-dropped, with its live memtable also queued as
// flushed, which Badger later frees under readers or trips an assertion on (log.Fatalf: the
// whole gateway exits). The store is driven in a child process, as the failure kills it.
func TestReclaimWhoseFlushFailsFailsTheStoreAndLosesNothing(t *testing.T) {
	if dir := os.Getenv("HOOKGATE_RECLAIM_FLUSHFAIL_DIR"); dir != "" {
		reclaimWithFailingFlush(t, dir)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReclaimWhoseFlushFailsFailsTheStoreAndLosesNothing$", "-test.v")
	cmd.Env = append(os.Environ(), "HOOKGATE_RECLAIM_FLUSHFAIL_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Fatalf("the store after a Reclaim whose flush failed: %v; last lines:\n%s", err, strings.Join(lines[max(0, len(lines)-12):], "\n"))
	}
}

func reclaimWithFailingFlush(t *testing.T, dir string) {
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	done := func(from, n int) {
		t.Helper()
		concurrently(t, n, func(i int) error {
			id := fmt.Sprintf("%0500d", from+i) // ~0.5 KiB a key: a memtable holds a few thousand
			return b.Done(ctx, dedupe.Claim{Namespace: "n", ID: id}, time.Hour)
		})
	}
	done(0, 100)
	// The next table Badger writes cannot be created (a directory holds its name), as on a
	// full disk.
	blocker := filepath.Join(dir, "000001.sst")
	if err := os.Mkdir(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	err = b.Reclaim(ctx)
	if err == nil {
		t.Fatal("Reclaim succeeded with no room for a table: the flush failure was never injected")
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	// The store is failed, and says so, so the pool closes it and opens the directory again;
	// meanwhile it refuses writes rather than take them into a half-dropped memtable.
	if b.Err() == nil {
		t.Fatalf("Reclaim failed (%v) but the store does not report itself failed, so the pool would keep it", err)
	}
	if err := b.Done(ctx, dedupe.Claim{Namespace: "n", ID: "after"}, time.Hour); err == nil {
		t.Fatal("the failed store accepted a write")
	}
	if err := b.Close(); err != nil {
		t.Logf("closing the failed store: %v", err)
	}
	// Nothing written before the failure is lost.
	if b, err = Open(dir); err != nil {
		t.Fatalf("reopening after the failed Reclaim: %v", err)
	}
	defer b.Close()
	for i := range 100 {
		out, err := b.Claim(ctx, dedupe.Claim{Namespace: "n", ID: fmt.Sprintf("%0500d", i), Lease: time.Minute})
		if err != nil || out != dedupe.Duplicate {
			t.Fatalf("ID %d after the failed Reclaim and a reopen: %v, %v; want a duplicate", i, out, err)
		}
	}
}
