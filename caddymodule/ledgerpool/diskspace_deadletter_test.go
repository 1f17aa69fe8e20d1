package ledgerpool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// diskUsed is the space dir's files take on disk (allocated blocks, not apparent sizes: Badger's
// files are sparse).
func diskUsed(t *testing.T, dir string) int64 {
	t.Helper()
	var used int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return err
		}
		used += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return used
}

// Below min_free, deliveries and their outcomes go on, on the promise that they write a few
// hundred bytes an event. A dead letter keeps its body for replay, so Update(Dead) would store the
// whole payload again: an upstream that starts answering 4xx (or an outage that exhausts
// max_attempts) would dead-letter the backlog that filled the disk and write as much again, below
// the watermark. The pool refuses it (dedupe.ErrNoRoom; the deliverer keeps the event pending),
// and a replay too, and what the deliverer does write stays small.
func TestDeadLetteringBelowWatermarkWritesNoBodies(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := newFakeDisk(t, dir, 1<<30)
	p := f.pool
	const events, bodySize = 200, 32 << 10
	body := []byte(`{"pad":"` + strings.Repeat("x", bodySize) + `"}`)
	for i := range events {
		id := fmt.Sprintf("evt_%d", i)
		ev := &dedupe.Event{ID: id, Method: "POST", URI: "/hooks", Body: body}
		if out, err := p.Accept(ctx, dedupe.Claim{Namespace: "q", ID: id}, ev, time.Hour); err != nil || out != dedupe.Claimed {
			t.Fatalf("accept with room: %v %v", out, err)
		}
	}
	f.set(testMinFree - 1) // the backlog filled the disk to the watermark: accepts are refused
	before := diskUsed(t, dir)

	// The upstream answers 4xx: the deliverer would dead-letter every event; it is refused, and
	// the deliverer postpones each one instead (deliver/worker.go).
	leased, err := p.Lease(ctx, "q", time.Now(), events, time.Minute)
	if err != nil || len(leased) == 0 {
		t.Fatalf("lease below min_free: %d events, %v", len(leased), err)
	}
	for _, ev := range leased {
		ev.State, ev.Attempts, ev.LastStatus = dedupe.Dead, 1, 400
		if err := p.Update(ctx, ev, 720*time.Hour); !errors.Is(err, dedupe.ErrNoRoom) {
			t.Fatalf("dead-lettering below min_free: %v, want ErrNoRoom", err)
		}
		ev.State, ev.NextAttempt = dedupe.Pending, time.Now().Add(time.Minute)
		if err := p.Update(ctx, ev, 0); err != nil {
			t.Fatalf("postponing below min_free: %v", err)
		}
	}
	written := diskUsed(t, dir) - before
	if limit := int64(len(leased)) * 2 << 10; written > limit {
		t.Fatalf("the outcomes of %d events of %d KiB below min_free wrote %.1f MiB to the ledger's disk (%d KiB an event), over %d KiB",
			len(leased), bodySize>>10, float64(written)/(1<<20), written/int64(len(leased))>>10, limit>>10)
	}
	if err := p.Replay(ctx, "q", "evt_0", time.Now()); !errors.Is(err, dedupe.ErrNoRoom) {
		t.Fatalf("replay below min_free: %v, want ErrNoRoom", err)
	}

	f.set(1 << 30) // room again: the next outcome dead-letters as usual
	later := time.Now().Add(2 * time.Minute)
	again, err := p.Lease(ctx, "q", later, 1, time.Minute)
	if err != nil || len(again) != 1 {
		t.Fatalf("lease with room: %d events, %v", len(again), err)
	}
	again[0].State = dedupe.Dead
	if err := p.Update(ctx, again[0], time.Hour); err != nil {
		t.Fatalf("dead-lettering with room: %v", err)
	}
}
