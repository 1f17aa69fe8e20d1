package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// The benchmarks compare the group committer (Open) with the write path it replaced: Badger
// syncing every transaction itself (SyncWrites), one transaction per write, writing the keys
// the store's request writes. Each op waits on syncs, not on CPU, and a gateway has many
// requests waiting at once, so both run ~64 callers.
const benchCallers = 64

// runCallers runs op from benchCallers goroutines and reports the transactions committed per
// op (each is one WAL sync and one value-log sync): groups, when the store's committer is
// given, else one per write.
func runCallers(b *testing.B, commits *committer, writesPerOp int, op func(seq int64)) {
	var seq atomic.Int64
	b.SetParallelism((benchCallers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var groups0 int64
	if commits != nil {
		groups0 = commits.groups.Load()
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op(seq.Add(1))
		}
	})
	b.StopTimer()
	if commits != nil {
		b.ReportMetric(float64(commits.groups.Load()-groups0)/float64(b.N), "commits/op")
	} else {
		b.ReportMetric(float64(writesPerOp), "commits/op")
	}
}

// openPerTxnBadger opens Badger with the store's profile, but with the conflict detection that
// concurrent writers of their own transactions need.
func openPerTxnBadger(b *testing.B) *badger.DB {
	db, err := badger.Open(badgerOptions(b.TempDir()).WithDetectConflicts(true).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkAcceptPerTxnSync is the baseline: one synced transaction per Accept of a 1 KiB
// body, writing the event, its ID and its due entry.
func BenchmarkAcceptPerTxnSync(b *testing.B) {
	db := openPerTxnBadger(b)
	body := bytes.Repeat([]byte("x"), 1<<10)
	runCallers(b, nil, 1, func(seq int64) {
		id := fmt.Sprint("evt_", seq)
		err := db.Update(func(txn *badger.Txn) error {
			if _, err := txn.Get([]byte("id/" + id)); !errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("ID read: %v", err)
			}
			for k, v := range map[string][]byte{"id/" + id: nil, "ev/" + id: body, "due/" + id: nil} {
				if err := txn.Set([]byte(k), v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("Accept: %v", err)
		}
	})
}

// BenchmarkAcceptGroupCommit is the same load on the group committer.
func BenchmarkAcceptGroupCommit(b *testing.B) {
	s := openTest(b)
	body := bytes.Repeat([]byte("x"), 1<<10)
	runCallers(b, s.commits, 1, func(seq int64) {
		id := fmt.Sprint("evt_", seq)
		ev := queued(id, time.Now())
		ev.Body = body
		out, err := s.Accept(context.Background(), dedupe.Claim{Namespace: "stripe", ID: id, Lease: time.Minute}, ev, time.Hour)
		if err != nil || out != dedupe.Claimed {
			b.Fatalf("Accept: %v, %v", out, err)
		}
	})
}

// BenchmarkClaimDonePerTxnSync is sync mode's pair per request, each in its own synced
// transaction: the claim's read and write, then the done mark.
func BenchmarkClaimDonePerTxnSync(b *testing.B) {
	db := openPerTxnBadger(b)
	runCallers(b, nil, 2, func(seq int64) {
		key := []byte(fmt.Sprint("id/evt_", seq))
		claim := func(txn *badger.Txn) error {
			if _, err := txn.Get(key); !errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("ID read: %v", err)
			}
			return txn.Set(key, []byte("claimed"))
		}
		if err := db.Update(claim); err != nil {
			b.Fatalf("Claim: %v", err)
		}
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set(key, []byte("done")) }); err != nil {
			b.Fatalf("Done: %v", err)
		}
	})
}

// BenchmarkClaimDoneGroupCommit is the same load on the group committer, whose claims are
// held in memory: one write per request.
func BenchmarkClaimDoneGroupCommit(b *testing.B) {
	s := openTest(b)
	runCallers(b, s.commits, 1, func(seq int64) {
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

// BenchmarkAcceptAloneLatency is one caller accepting 1 KiB events one after another, 0.5 ms
// apart, as at a low steady rate: the latency of a synced commit on this disk with nothing to
// share it with, which is the floor of async mode's added latency. It reports p50 and p99 in µs.
func BenchmarkAcceptAloneLatency(b *testing.B) {
	s := openTest(b)
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
