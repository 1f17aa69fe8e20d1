package ledgerpool

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
)

// "Log one WARN when the watermark is crossed and one INFO when it clears, not
// one per request." Near the watermark free space moves both ways all the time (a memtable flush
// or a compaction writes new tables, then deletes old ones; value-log GC deletes a file; the
// deliverer's writes take a little): with no hysteresis, every statfs reading (one per 500 ms)
// that lands on the other side of min_free logs a WARN or an INFO, and accepts flap with it. Here
// free space wobbles by 1 MiB around min_free over 20 readings (10 s of a real gateway): 20 log
// lines, and the route alternates between 202 and 503.
func TestWatermarkDoesNotFlapAroundMinFree(t *testing.T) {
	ctx := context.Background()
	f := newFakeDisk(t, t.TempDir(), 1<<30)
	p := f.pool
	const readings = 20
	accepted := 0
	for i := range readings {
		if i%2 == 0 {
			f.set(testMinFree - 1<<20)
		} else {
			f.set(testMinFree + 1<<20)
		}
		id := "evt_" + time.Now().Format("150405.000000000")
		if _, err := p.Accept(ctx, dedupe.Claim{Namespace: "q", ID: id}, queued(id), time.Hour); err == nil {
			accepted++
		}
	}
	warns, infos := f.count(zap.WarnLevel, "below min_free"), f.count(zap.InfoLevel, "back above min_free")
	if warns > 1 || infos > 1 {
		t.Fatalf("free space wobbling by 1 MiB around min_free over %d readings logged %d WARN and %d INFO lines (want at most one each), and the route accepted %d of %d events in between refusals",
			readings, warns, infos, accepted, readings)
	}
}

// A statfs that fails tells nothing about free space: a low disk stays low (no "back above"
// line, accepts still refused) rather than being taken for one with room.
func TestWatermarkKeepsItsStateWhenStatfsFails(t *testing.T) {
	ctx := context.Background()
	f := newFakeDisk(t, t.TempDir(), 1<<30)
	f.set(testMinFree - 1)
	if err := f.pool.disk.admit(); err == nil {
		t.Fatal("below min_free: admitted")
	}
	f.pool.disk.free = func(string) (uint64, error) { return 0, errors.New("injected: statfs failed") }
	f.set(0)
	id := "evt_statfs_failed"
	if _, err := f.pool.Accept(ctx, dedupe.Claim{Namespace: "q", ID: id}, queued(id), time.Hour); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("accept on a low disk whose statfs then failed: %v, want ErrDiskLow", err)
	}
	if n := f.count(zap.InfoLevel, "back above min_free"); n != 0 {
		t.Fatalf("%d INFO lines saying space is back, from a failed statfs", n)
	}
}
