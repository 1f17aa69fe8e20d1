package badgerstore

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// The benchmarks compare the group committer (Open) with the write
// path it replaced, Badger syncing every transaction itself (perTxnSync),
// on the same request code. Each op waits on syncs, not on CPU, and a
// gateway has many requests waiting at once, so both run ~64 callers.
const benchCallers = 64

// openBench opens a store for a benchmark in either mode.
func openBench(b *testing.B, perTxnSync bool) *Store {
	b.Helper()
	return openStore(b, perTxnSync)
}

// runCallers runs op from benchCallers goroutines and reports, for the
// committer, the transactions committed per op: each is one WAL sync and
// one value-log sync. (Per transaction, Badger syncs the WAL once per
// transaction and the value log once per batch of them.)
func runCallers(b *testing.B, s *Store, op func(seq int64)) {
	var seq atomic.Int64
	b.SetParallelism((benchCallers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var groups0 int64
	if s.commits != nil {
		groups0 = s.commits.groups.Load()
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op(seq.Add(1))
		}
	})
	b.StopTimer()
	if s.commits != nil {
		b.ReportMetric(float64(s.commits.groups.Load()-groups0)/float64(b.N), "commits/op")
	} else {
		b.ReportMetric(1, "commits/op")
	}
}

func benchAccept(b *testing.B, perTxnSync bool) {
	s := openBench(b, perTxnSync)
	body := bytes.Repeat([]byte("x"), 1<<10)
	runCallers(b, s, func(seq int64) {
		id := fmt.Sprint("evt_", seq)
		ev := queued(id, time.Now())
		ev.Body = body
		out, err := s.Accept(context.Background(), dedupe.Claim{Namespace: "stripe", ID: id, Lease: time.Minute}, ev, time.Hour)
		if err != nil || out != dedupe.Claimed {
			b.Fatalf("Accept: %v, %v", out, err)
		}
	})
}

func benchClaimDone(b *testing.B, perTxnSync bool) {
	s := openBench(b, perTxnSync)
	runCallers(b, s, func(seq int64) {
		c := dedupe.Claim{Namespace: "bench", ID: fmt.Sprint("evt_", seq), Lease: time.Minute}
		out, err := s.Claim(context.Background(), c)
		if err != nil || out != dedupe.Claimed {
			b.Fatalf("Claim: %v, %v", out, err)
		}
		if err := s.Done(context.Background(), c, time.Hour); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkAcceptPerTxnSync is the baseline: one transaction per Accept of
// a 1 KiB body, synced by Badger.
func BenchmarkAcceptPerTxnSync(b *testing.B) { benchAccept(b, true) }

// BenchmarkAcceptGroupCommit is the same load on the group committer.
func BenchmarkAcceptGroupCommit(b *testing.B) { benchAccept(b, false) }

// BenchmarkClaimDonePerTxnSync is sync mode's pair of writes per request,
// each in its own synced transaction.
func BenchmarkClaimDonePerTxnSync(b *testing.B) { benchClaimDone(b, true) }

// BenchmarkClaimDoneGroupCommit is the same load on the group committer.
func BenchmarkClaimDoneGroupCommit(b *testing.B) { benchClaimDone(b, false) }

// BenchmarkAcceptAloneLatency is one caller accepting 1 KiB events one after another, 0.5 ms
// apart, as at a low steady rate: the latency of a synced commit on this disk with nothing to
// share it with, which is the floor of async mode's added latency. It reports p50 and p99 in µs.
func BenchmarkAcceptAloneLatency(b *testing.B) {
	s := openBench(b, false)
	body := bytes.Repeat([]byte("x"), 1<<10)
	var took []time.Duration
	seq := 0
	for b.Loop() {
		seq++
		ev := queued(fmt.Sprint("evt_", seq), time.Now())
		ev.Body = body
		start := time.Now()
		if _, err := s.Accept(context.Background(), dedupe.Claim{Namespace: "stripe", ID: ev.ID}, ev, time.Hour); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		time.Sleep(500 * time.Microsecond)
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
