package badgerstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// BenchmarkDeliveryCycle is the ledger's share of async delivery: b.N events accepted (by 64
// callers, as requests do), then 16 workers each leasing one event at a time and updating it
// Delivered, as deliver.DefaultWorkers do. It reports µs and group commits per event delivered
// (the Accepts are not timed), and the entries (keys written or deleted) that the whole cycle of
// one event writes, counted on a small run that Badger has not compacted.
func BenchmarkDeliveryCycle(b *testing.B) {
	entries := entriesPerCycle(b, 1000)
	s := openTest(b)
	enqueueMany(b, s, "cycle", b.N, time.Now())
	commits := s.commits.groups.Load()
	b.ResetTimer()
	deliverConcurrently(b, s, b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/event")
	b.ReportMetric(float64(s.commits.groups.Load()-commits)/float64(b.N), "commits/event")
	b.ReportMetric(entries, "entries/event")
}

// deliverConcurrently has 16 workers lease events one at a time and update them Delivered until
// n are.
func deliverConcurrently(b testing.TB, s *Store, n int) {
	var delivered atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for delivered.Load() < int64(n) {
				evs, err := s.Lease(context.Background(), "stripe", time.Now(), 1, time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				for _, ev := range evs {
					ev.State, ev.Attempts, ev.LastStatus = dedupe.Delivered, 1, 200
					if err := s.Update(context.Background(), ev, time.Hour); err != nil {
						b.Error(err)
						return
					}
					delivered.Add(1)
				}
			}
		})
	}
	wg.Wait()
}

// entriesPerCycle accepts and delivers n events with IDs on a fresh store and counts the entries
// written, every version of every key (deletes included) that Badger still holds.
func entriesPerCycle(b *testing.B, n int) float64 {
	s := openTest(b)
	concurrently(b, n, func(i int) error {
		ev := queued(fmt.Sprintf("count-%05d", i), time.Now())
		_, err := s.Accept(context.Background(), dedupe.Claim{Namespace: "stripe", ID: ev.ID}, ev, time.Hour)
		return err
	})
	deliverConcurrently(b, s, n)
	entries := storedVersions(b, s.db, nil)
	return float64(entries) / float64(n)
}

// storedVersions counts every version of every key under prefix (nil: all keys) that Badger
// still holds, deletes included.
func storedVersions(tb testing.TB, db *badger.DB, prefix []byte) int {
	tb.Helper()
	versions := 0
	err := db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.AllVersions, opts.PrefetchValues, opts.Prefix = true, false, prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			versions++
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return versions
}

// BenchmarkLeaseEvents is the Lease's share alone: b.N events accepted (not timed), then leased
// 32 at a time, as a deliverer with the default workers leases ahead. Its allocs/op and B/op are
// per event leased: two Badger reads each (the record, for the due entry found, and the payload)
// and what hands the event out. Its time moves with the machine.
func BenchmarkLeaseEvents(b *testing.B) {
	s := openTest(b)
	enqueueMany(b, s, "lease", b.N, time.Now())
	b.ReportAllocs()
	b.ResetTimer()
	for leased := 0; leased < b.N; {
		evs, err := s.Lease(context.Background(), "stripe", time.Now(), 32, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		if len(evs) == 0 {
			b.Fatalf("%d of %d events leased, then none", leased, b.N)
		}
		leased += len(evs)
	}
}
