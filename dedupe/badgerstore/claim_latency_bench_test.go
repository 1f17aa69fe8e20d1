package badgerstore

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// syncCallers is how many sync-mode requests the latency benchmark keeps in flight at once.
const syncCallers = 16

// BenchmarkSyncCycleLatency runs sync mode's cycle, Claim then the upstream's time then Done,
// from syncCallers goroutines on distinct IDs with a digest each and versions of 64 shared
// entities, and reports the percentiles of Claim's own latency and of the whole cycle, and the
// process's CPU time per cycle: a Claim that waits for the group commit in flight shows in
// claim-p99.
func BenchmarkSyncCycleLatency(b *testing.B) {
	for _, upstream := range []time.Duration{0, time.Millisecond} {
		b.Run(fmt.Sprint("upstream=", upstream), func(b *testing.B) {
			s := openTest(b)
			claims := make([]int64, b.N)
			cycles := make([]int64, b.N)
			var seq, stale atomic.Int64
			b.SetParallelism((syncCallers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					n := seq.Add(1)
					c := syncBenchClaim(n)
					start := time.Now()
					out, err := s.Claim(ctx, c)
					claimed := time.Now()
					if err != nil {
						b.Fatalf("Claim: %v", err)
					}
					switch out {
					case dedupe.Claimed:
					case dedupe.Stale:
						stale.Add(1)
					default:
						b.Fatalf("Claim: %v", out)
					}
					if upstream > 0 {
						time.Sleep(upstream)
					}
					if out == dedupe.Claimed {
						if err := s.Done(ctx, c, time.Hour); err != nil {
							b.Fatal(err)
						}
					}
					claims[n-1] = int64(claimed.Sub(start))
					cycles[n-1] = int64(time.Since(start))
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/1e3/float64(b.N), "cpu-µs/op")
			reportPercentiles(b, "claim", claims)
			reportPercentiles(b, "cycle", cycles)
			b.ReportMetric(float64(stale.Load())/float64(b.N), "stale/op")
		})
	}
}

// processCPU is the process's user and system CPU time so far, in ns: the store's own
// goroutines and Badger's, which a request's cost includes.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportPercentiles reports the p50 and p99 of latencies (ns) in µs, as name-p50-µs and name-p99-µs.
func reportPercentiles(b *testing.B, name string, latencies []int64) {
	slices.Sort(latencies)
	at := func(q float64) float64 { return float64(latencies[int(q*float64(len(latencies)-1))]) / 1e3 }
	b.ReportMetric(at(0.50), name+"-p50-µs")
	b.ReportMetric(at(0.99), name+"-p99-µs")
}

// syncBenchClaim is the benchmarks' nth claim: its own ID and digest, version n of one of 64
// entities.
func syncBenchClaim(n int64) dedupe.Claim {
	return dedupe.Claim{
		Namespace: "bench", ID: fmt.Sprint("evt_", n), Digest: fmt.Sprint("sha_", n),
		Entity: fmt.Sprint("ent_", n%64), Version: n, Lease: time.Minute,
	}
}

// BenchmarkClaimRelease is a Claim's own cost, no write in the store: Claim then Release of
// distinct IDs with a digest and an entity version each, from GOMAXPROCS goroutines.
func BenchmarkClaimRelease(b *testing.B) {
	s := openTest(b)
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			c := syncBenchClaim(seq.Add(1))
			if out, err := s.Claim(ctx, c); err != nil || out != dedupe.Claimed {
				b.Fatalf("Claim: %v, %v", out, err)
			}
			if err := s.Release(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
