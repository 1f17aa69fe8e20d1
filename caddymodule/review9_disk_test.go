package caddymodule

import (
	"context"
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

// Review of issue 9: below min_free, "deliveries, their updates and value-log GC go on" on the
// promise (diskspace.go, README) that what still writes is "a few hundred bytes an event". But a
// dead letter keeps its body for replay, and Update(Dead) writes the whole payload again
// (dedupe.retain). An upstream that starts answering 4xx (or a long outage that exhausts
// max_attempts) dead-letters the backlog, and that writes as much again as the backlog that
// filled the disk in the first place, all of it below the watermark: the SIGBUS the watermark is
// there to prevent.
func TestReview9DeadLettersBelowWatermarkRewriteTheirBodies(t *testing.T) {
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

	// The upstream answers 4xx: the deliverer dead-letters every event (deliver/worker.go, rejected).
	dead := 0
	for dead < events {
		leased, err := p.Lease(ctx, "q", time.Now(), 64, time.Minute)
		if err != nil || len(leased) == 0 {
			t.Fatalf("lease below min_free: %d events, %v", len(leased), err)
		}
		for _, ev := range leased {
			ev.State, ev.Attempts, ev.LastStatus = dedupe.Dead, 1, 400
			if err := p.Update(ctx, ev, 720*time.Hour); err != nil {
				t.Fatalf("update below min_free: %v", err)
			}
			dead++
		}
	}
	written := diskUsed(t, dir) - before
	// README: "the deliverer's leases and outcomes are a few hundred bytes an event". Be generous:
	// 2 KiB an event.
	if limit := int64(events) * 2 << 10; written > limit {
		t.Fatalf("dead-lettering %d events of %d KiB below min_free wrote %.1f MiB to the ledger's disk (%d KiB an event), over %d KiB; the watermark's reserve counts a few hundred bytes an event",
			events, bodySize>>10, float64(written)/(1<<20), written/int64(events)>>10, limit>>10)
	}
}
