package badgerstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

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
	if got := f.start("ns", t0); got != "" {
		t.Fatalf("first scan starts at %q, want a full scan", got)
	}
	f.done("ns", floorAt(t0.Add(time.Minute)))
	if got, want := f.start("ns", t0.Add(time.Second)), floorAt(t0.Add(time.Minute)); got != want {
		t.Fatalf("scan starts at %q, want the floor %q", got, want)
	}
	f.done("ns", "")
	f.lower(nil, "ns", t0)
	f.settle(nil)
	if got := f.start("ns", t0.Add(2*time.Second)); got != floorAt(t0) {
		t.Fatalf("after a write below it, scan starts at %q, want %q", got, floorAt(t0))
	}
	f.done("ns", floorAt(t0.Add(time.Hour)))
	if got := f.start("ns", t0.Add(fullScanEvery+time.Second)); got != "" {
		t.Fatalf("after %v, scan starts at %q, want a full scan", fullScanEvery, got)
	}
}

// A scan reads a snapshot: a due entry written by a transaction that commits after it, whether
// applied before the scan began or while it ran, is not in it, so the scan must not raise the
// floor past that entry.
func TestFloorStaysBelowWritesAScanMayNotSee(t *testing.T) {
	var f dueFloors
	t0 := time.Now()
	f.start("ns", t0)
	f.done("ns", floorAt(t0))
	var before, during badger.Txn
	f.lower(&before, "ns", t0.Add(time.Second)) // applied, not yet committed
	f.start("ns", t0.Add(2*time.Second))
	f.lower(&during, "ns", t0.Add(3*time.Second))
	f.settle(&before)
	f.settle(&during)
	f.done("ns", floorAt(t0.Add(time.Hour)))
	if got := f.start("ns", t0.Add(4*time.Second)); got != floorAt(t0.Add(time.Second)) {
		t.Fatalf("scan starts at %q, want the earliest write the last one may have missed, %q", got, floorAt(t0.Add(time.Second)))
	}
	f.done("ns", floorAt(t0.Add(time.Hour)))
	if got := f.start("ns", t0.Add(5*time.Second)); got != floorAt(t0.Add(time.Hour)) {
		t.Fatalf("scan starts at %q, want %q once the writes were seen", got, floorAt(t0.Add(time.Hour)))
	}
}

// BenchmarkLeaseDrainsBacklog leases a 20,000-event backlog 16 at a time, as a deliverer does,
// and reports µs per Lease. Without the floor each Lease walked the tombstones of all earlier ones.
func BenchmarkLeaseDrainsBacklog(b *testing.B) {
	s := openTest(b)
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
	s := openTest(b)
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
