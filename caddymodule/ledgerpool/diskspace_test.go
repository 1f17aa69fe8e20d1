package ledgerpool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/badgerstore"
)

// fakeDisk is a pool whose filesystem reports the free space the test sets, and whose log the
// test reads.
type fakeDisk struct {
	pool  *Ledger
	free  atomic.Uint64
	reads atomic.Int64
	logs  *observer.ObservedLogs
}

const testMinFree = 64 << 20

func newFakeDisk(t *testing.T, dir string, free uint64) *fakeDisk {
	t.Helper()
	f := &fakeDisk{pool: newBadgerPool(BadgerTarget(dir), testMinFree)}
	f.free.Store(free)
	core, logs := observer.New(zap.InfoLevel)
	f.logs = logs
	f.pool.logger = zap.New(core)
	f.pool.disk.logger = f.pool.logger
	f.pool.disk.free = func(string) (uint64, error) {
		f.reads.Add(1)
		return f.free.Load(), nil
	}
	t.Cleanup(func() { _ = f.pool.Destruct() })
	return f
}

// set changes the free space and lets the watermark see it at once, rather than after its cache
// expires.
func (f *fakeDisk) set(free uint64) {
	f.free.Store(free)
	f.pool.disk.mu.Lock()
	f.pool.disk.checkedAt = time.Time{}
	f.pool.disk.mu.Unlock()
}

func (f *fakeDisk) count(level zapcore.Level, contains string) int {
	n := 0
	for _, e := range f.logs.All() {
		if e.Level == level && strings.Contains(e.Message, contains) {
			n++
		}
	}
	return n
}

func wantUnavailable(t *testing.T, what string, err error, want *Unavailable) {
	t.Helper()
	var got *Unavailable
	if !errors.As(err, &got) || got != want {
		t.Fatalf("%s: got %v, want the refusal %q", what, err, want.Reason)
	}
}

func queued(id string) *dedupe.Event {
	return &dedupe.Event{ID: id, Method: "POST", URI: "/hooks", Body: []byte(`{"pad":"` + strings.Repeat("x", 2048) + `"}`)}
}

// Below min_free, new work is refused (async accepts, sync claims), while what is already in the
// ledger goes on: the deliverer leases and records outcomes, sync requests with the app record
// done or release their claims. Space freed, accepts resume by themselves. One WARN, one INFO.
func TestDiskWatermarkRefusesOnlyNewWork(t *testing.T) {
	ctx := context.Background()
	f := newFakeDisk(t, t.TempDir(), 1<<30)
	p := f.pool
	if out, err := p.Accept(ctx, dedupe.Claim{Namespace: "q", ID: "evt_before"}, queued("evt_before"), time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("accept with room: %v %v", out, err)
	}
	held := []dedupe.Claim{{Namespace: "s", ID: "evt_with_app_1", Lease: time.Minute}, {Namespace: "s", ID: "evt_with_app_2", Lease: time.Minute}}
	for _, c := range held {
		if out, err := p.Claim(ctx, c); err != nil || out != dedupe.Claimed {
			t.Fatalf("claim with room: %v %v", out, err)
		}
	}

	f.set(testMinFree - 1) // above half of min_free: the ledger stays open
	for i := range 50 {
		id := fmt.Sprintf("evt_low_%d", i)
		_, err := p.Accept(ctx, dedupe.Claim{Namespace: "q", ID: id}, queued(id), time.Hour)
		wantUnavailable(t, "accept below min_free", err, ErrDiskLow)
		_, err = p.Claim(ctx, dedupe.Claim{Namespace: "s", ID: id, Lease: time.Minute})
		wantUnavailable(t, "sync claim below min_free", err, ErrDiskLow)
	}
	leased, err := p.Lease(ctx, "q", time.Now(), 10, time.Minute)
	if err != nil || len(leased) != 1 {
		t.Fatalf("lease below min_free: %d events, %v", len(leased), err)
	}
	leased[0].State = dedupe.Delivered
	if err := p.Update(ctx, leased[0], time.Hour); err != nil {
		t.Fatalf("update below min_free: %v", err)
	}
	if err := p.Done(ctx, held[0], time.Hour); err != nil {
		t.Fatalf("done of a held claim below min_free: %v", err)
	}
	if err := p.Release(ctx, held[1]); err != nil {
		t.Fatalf("release of a held claim below min_free: %v", err)
	}
	if n := f.count(zap.WarnLevel, "below min_free"); n != 1 {
		t.Fatalf("%d WARN lines for one crossing of the watermark, want 1: %v", n, f.logs.All())
	}

	f.set(testMinFree) // back at min_free: still low, so that free space wobbling there does not flap
	if _, err := p.Accept(ctx, dedupe.Claim{Namespace: "q", ID: "evt_at_min_free"}, queued("evt_at_min_free"), time.Hour); !errors.Is(err, ErrDiskLow) {
		t.Fatalf("accept at exactly min_free after being below it: %v, want ErrDiskLow until a quarter above", err)
	}
	f.set(testMinFree + testMinFree/4)
	if out, err := p.Accept(ctx, dedupe.Claim{Namespace: "q", ID: "evt_after"}, queued("evt_after"), time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("accept once space is back: %v %v", out, err)
	}
	if out, err := p.Claim(ctx, dedupe.Claim{Namespace: "s", ID: "evt_after", Lease: time.Minute}); err != nil || out != dedupe.Claimed {
		t.Fatalf("claim once space is back: %v %v", out, err)
	}
	if n := f.count(zap.InfoLevel, "back above min_free"); n != 1 {
		t.Fatalf("%d INFO lines for the watermark clearing, want 1: %v", n, f.logs.All())
	}
}

// The free space is read at most once per diskCheckInterval, not once per request.
func TestDiskWatermarkReadsFreeSpaceOncePerInterval(t *testing.T) {
	f := newFakeDisk(t, t.TempDir(), 1<<30)
	start := time.Now()
	for range 10000 {
		if err := f.pool.disk.admit(); err != nil {
			t.Fatal(err)
		}
	}
	if max := int64(time.Since(start)/diskCheckInterval) + 1; f.reads.Load() > max {
		t.Fatalf("free space read %d times for 10000 requests, want at most %d", f.reads.Load(), max)
	}
}

// Restarted on a full disk, the pool does not open the ledger (Badger would write into a mapped
// page the disk cannot give: SIGBUS), says so once, and opens it by itself once space is freed.
func TestLedgerStaysClosedOnFullDiskUntilSpaceIsFreed(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ledger")
	f := newFakeDisk(t, dir, 0)
	for range 5 {
		_, err := f.pool.Lease(ctx, "q", time.Now(), 10, time.Minute)
		wantUnavailable(t, "lease on a full disk", err, ErrDiskFull)
		_, err = f.pool.Accept(ctx, dedupe.Claim{Namespace: "q", ID: "evt_full"}, queued("evt_full"), time.Hour)
		wantUnavailable(t, "accept on a full disk", err, ErrDiskLow)
		f.set(0)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the ledger was opened on a full disk (%s: %v)", dir, err)
	}
	if n := f.count(zap.ErrorLevel, "disk is full"); n != 1 {
		t.Fatalf("%d ERROR lines for a ledger not opened, want 1: %v", n, f.logs.All())
	}

	f.set(1 << 30)
	if _, err := f.pool.Lease(ctx, "q", time.Now(), 10, time.Minute); err != nil {
		t.Fatalf("lease once space is freed: %v", err)
	}
	if out, err := f.pool.Accept(ctx, dedupe.Claim{Namespace: "q", ID: "evt_full"}, queued("evt_full"), time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("accept once space is freed: %v %v", out, err)
	}
	if n := f.count(zap.InfoLevel, "ledger opened"); n != 1 {
		t.Fatalf("%d INFO lines for the ledger opening, want 1: %v", n, f.logs.All())
	}
}

// A directory another process holds (here: this test, through badgerstore.Open) is refused
// with a reason, and logged once with the directory and the holder's PID and command line.
func TestLockedLedgerDirectoryNamesItsHolderOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	holder, err := badgerstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	f := newFakeDisk(t, dir, 1<<30)
	for range 3 {
		_, err := f.pool.Lease(ctx, "q", time.Now(), 10, time.Minute)
		wantUnavailable(t, "lease of a locked directory", err, ErrLedgerLocked)
		_, err = f.pool.Accept(ctx, dedupe.Claim{Namespace: "q", ID: "evt_locked"}, queued("evt_locked"), time.Hour)
		wantUnavailable(t, "accept into a locked directory", err, ErrLedgerLocked)
		f.pool.mu.Lock()
		f.pool.notBefore = time.Time{} // the next request tries the open again
		f.pool.mu.Unlock()
	}
	var lines []observer.LoggedEntry
	for _, e := range f.logs.All() {
		if strings.Contains(e.Message, "locked by another process") {
			lines = append(lines, e)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines for the locked directory over 3 tries, want 1: %v", len(lines), f.logs.All())
	}
	fields := lines[0].ContextMap()
	exe, _ := os.Executable()
	if fields["dir"] != dir || fields["holder_pid"] != int64(os.Getpid()) || !strings.Contains(fmt.Sprint(fields["holder_cmdline"]), filepath.Base(exe)) {
		t.Fatalf("the log does not name the directory and its holder (pid %d, %s): %v", os.Getpid(), exe, fields)
	}

	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := f.pool.Accept(ctx, dedupe.Claim{Namespace: "q", ID: "evt_locked"}, queued("evt_locked"), time.Hour); err != nil || out != dedupe.Claimed {
		t.Fatalf("accept once the holder let go: %v %v", out, err)
	}
}
