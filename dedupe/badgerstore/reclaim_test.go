package badgerstore

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// A drained backlog must give its disk space back when asked: on a nearly full disk the
// watermark refuses accepts until it does. Value-log GC alone finds nothing to rewrite, as
// Badger has not compacted the versions that pointed at the delivered bodies.
func TestReclaimGivesBackTheSpaceOfDeliveredBodies(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	const events = 6000
	body := bytes.Repeat([]byte("x"), 8<<10)
	acceptAndDeliver(t, b, events, body)
	// A last event stays pending: its body must survive.
	last := queued("evt-pending", base)
	last.Body = body
	if _, err := b.Accept(ctx, dedupe.Claim{Namespace: last.Namespace}, last, time.Hour); err != nil {
		t.Fatal(err)
	}

	drained := diskUsage(t, dir)
	if err := b.Reclaim(ctx); err != nil {
		t.Fatal(err)
	}
	after := diskUsage(t, dir)
	t.Logf("ledger after draining %d events of 8 KiB: %d MiB; after Reclaim: %d MiB", events, drained>>20, after>>20)
	if after > drained/3 {
		t.Fatalf("Reclaim left %d of %d MiB on disk: the delivered bodies' space was not given back", after>>20, drained>>20)
	}
	got, err := b.Get(ctx, last.Namespace, last.ID)
	if err != nil || !bytes.Equal(got.Body, body) {
		t.Fatalf("the pending event after Reclaim: %v, body intact %v", err, err == nil && bytes.Equal(got.Body, body))
	}
	if n := len(lease(t, b, base, 16, time.Minute)); n != 1 {
		t.Fatalf("leased %d events after Reclaim, want the pending one", n)
	}
}

// acceptAndDeliver accepts events events, each with body, side by side, then delivers them all:
// their bodies are garbage in the value log from then on.
func acceptAndDeliver(t *testing.T, b *Store, events int, body []byte) {
	t.Helper()
	concurrently(t, events, func(i int) error {
		ev := queued(fmt.Sprintf("evt-%05d", i), base)
		ev.Body = body
		_, err := b.Accept(context.Background(), dedupe.Claim{Namespace: ev.Namespace}, ev, time.Hour)
		return err
	})
	deliverAll(t, b, events)
}

// diskUsage is the space dir's files take on disk (allocated blocks, as a filesystem counts it).
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return err
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}
