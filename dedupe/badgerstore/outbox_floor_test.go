package badgerstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// An entry written below the floor a Lease left behind is still found: writes lower the floor.
func TestLeaseFindsEntriesWrittenBelowTheFloor(t *testing.T) {
	b := openTest(t)
	sec := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	for n := 1; n <= 3; n++ {
		enqueue(t, b, queued(fmt.Sprint("e", n), sec(n)))
	}
	expectIDs(t, "first lease", lease(t, b, sec(10), 10, time.Hour), "e1,e2,e3")
	enqueue(t, b, queued("late", sec(2)))
	expectIDs(t, "an event due before the floor", lease(t, b, sec(10), 10, time.Hour), "late")
}

func TestFloorFallsBackToFullScans(t *testing.T) {
	var f dueFloors
	t0 := time.Now()
	if got := f.start("ns", t0); got != 0 {
		t.Fatalf("first scan starts at %d, want a full scan", got)
	}
	f.raise("ns", sortNanos(t0.Add(time.Minute)))
	if got, want := f.start("ns", t0.Add(time.Second)), sortNanos(t0.Add(time.Minute)); got != want {
		t.Fatalf("scan starts at %d, want the floor %d", got, want)
	}
	f.lower("ns", t0)
	if got := f.start("ns", t0.Add(2*time.Second)); got != sortNanos(t0) {
		t.Fatalf("after a write below it, scan starts at %d, want %d", got, sortNanos(t0))
	}
	f.raise("ns", sortNanos(t0.Add(time.Hour)))
	if got := f.start("ns", t0.Add(fullScanEvery+time.Second)); got != 0 {
		t.Fatalf("after %v, scan starts at %d, want a full scan", fullScanEvery, got)
	}
}

// BenchmarkLeaseDrainsBacklog leases a 20,000-event backlog 16 at a time, as a deliverer does,
// and reports µs per Lease. Without the floor each Lease walked the tombstones of all earlier ones.
func BenchmarkLeaseDrainsBacklog(b *testing.B) {
	s := openBench(b, false)
	ctx := context.Background()
	leases, batch := 0, 0
	for b.Loop() {
		b.StopTimer()
		batch++
		for i := range 20000 {
			ev := queued(fmt.Sprintf("backlog-%d-%d", batch, i), time.Now())
			if _, err := s.Accept(ctx, dedupe.Claim{Namespace: ev.Namespace}, ev, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for {
			evs, err := s.Lease(ctx, "stripe", time.Now(), 16, time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			if len(evs) == 0 {
				break
			}
			leases++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(leases), "µs/lease")
}

// BenchmarkLeaseIdleAfterDeliveries reports µs per Lease that finds nothing due, right after
// 20,000 events were leased and delivered within their lease time, as at a steady rate: each
// Lease used to walk the tombstones of their lease-expiry entries.
func BenchmarkLeaseIdleAfterDeliveries(b *testing.B) {
	s := openBench(b, false)
	ctx := context.Background()
	for i := range 20000 {
		ev := queued(fmt.Sprintf("delivered-%d", i), time.Now())
		if _, err := s.Accept(ctx, dedupe.Claim{Namespace: ev.Namespace}, ev, time.Hour); err != nil {
			b.Fatal(err)
		}
		evs, err := s.Lease(ctx, ev.Namespace, time.Now(), 1, time.Hour)
		if err != nil || len(evs) != 1 {
			b.Fatalf("lease: %v, %d events", err, len(evs))
		}
		evs[0].State = dedupe.Delivered
		if err := s.Update(ctx, evs[0], time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		evs, err := s.Lease(ctx, "stripe", time.Now(), 16, time.Hour)
		if err != nil || len(evs) != 0 {
			b.Fatalf("lease: %v, %d events", err, len(evs))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/lease")
}
