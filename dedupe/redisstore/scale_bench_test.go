package redisstore

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// BenchmarkLargeNamespaceScale measures single calls against a namespace of VOLUME_EVENTS (default
// 100000) events, at ten times and more the scale the tests use. It reports figures, asserts
// nothing timed. Run once:
//
//	go test -run '^$' -bench LargeNamespaceScale -benchtime 1x ./dedupe/redisstore/
func BenchmarkLargeNamespaceScale(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("VOLUME_EVENTS")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		scaleDistinctEntities(b, n)
		scaleOneEntity(b, n)
	}
}

// pipeAccept queues n events due at base through one pipeline of the accept script; entity(i)
// names each one's entity and version.
func pipeAccept(b *testing.B, s *Store, n int, entity func(i int) (string, int64)) {
	b.Helper()
	tag, _ := s.tag(ns)
	if err := acceptScript.Load(ctx, s.client).Err(); err != nil {
		b.Fatal(err)
	}
	for lo := 0; lo < n; lo += 5000 {
		pipe := s.client.Pipeline()
		for i := lo; i < min(n, lo+5000); i++ {
			ev := queued(fmt.Sprint("x", i), base)
			ev.Entity, ev.Version = entity(i)
			keys, args := acceptCall(tag, dedupe.Claim{Namespace: ns, Entity: ev.Entity, Version: ev.Version}, []dedupe.Destination{{Name: dedupe.DefaultDestination}}, ev, time.Hour, fmt.Sprint("call", i), base)
			acceptScript.Run(ctx, pipe, keys, args...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func timed(b *testing.B, what string, f func() string) {
	b.Helper()
	start := time.Now()
	detail := f()
	b.Logf("%-60s %10v  %s", what, time.Since(start).Round(time.Microsecond), detail)
}

func scaleDistinctEntities(b *testing.B, n int) {
	s := storeAt(&testing.T{}, server.Addr, newPrefix())
	defer s.Close()
	start := time.Now()
	pipeAccept(b, s, n, func(i int) (string, int64) { return "ent" + strconv.Itoa(i), 1 })
	b.Logf("%d events of distinct entities accepted (pipelined) in %v", n, time.Since(start).Round(time.Millisecond))
	now := base.Add(time.Minute)
	var first []*dedupe.Event
	timed(b, "Lease n=1024 (first)", func() string {
		evs, err := s.Lease(ctx, ns, now, 1024, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		first = evs
		return fmt.Sprintf("%d events", len(evs))
	})
	timed(b, "Lease n=16", func() string {
		evs, _ := s.Lease(ctx, ns, now, 16, time.Minute)
		return fmt.Sprintf("%d events", len(evs))
	})
	timed(b, "Update Delivered", func() string {
		first[0].State = dedupe.Delivered
		return fmt.Sprint(s.Update(ctx, first[0], time.Hour))
	})
	timed(b, "Update Pending", func() string {
		first[1].NextAttempt = now.Add(time.Hour)
		return fmt.Sprint(s.Update(ctx, first[1], time.Hour))
	})
	timed(b, "List pending limit 100 from the start", func() string {
		evs, err := s.List(ctx, ns, dedupe.Pending, dedupe.Cursor{}, 100)
		return fmt.Sprint(len(evs), err)
	})
	timed(b, "List pending limit 1000 from the middle", func() string {
		evs, err := s.List(ctx, ns, dedupe.Pending, dedupe.Cursor{AcceptedAt: base, ID: "x5"}, 1000)
		return fmt.Sprint(len(evs), err)
	})
	timed(b, "Pending", func() string {
		p, err := s.Pending(ctx, ns)
		return fmt.Sprint(p, err)
	})
	keys, _ := s.client.DBSize(ctx).Result()
	timed(b, fmt.Sprintf("PendingByNamespace over %d keys", keys), func() string {
		p, err := s.PendingByNamespace(ctx)
		return fmt.Sprint(len(p), " namespaces ", err)
	})
	// Lease every event for a minute, then lease after the lapse: n entity holds lapsed at once.
	calls := 0
	for {
		evs, err := s.Lease(ctx, ns, now, 1024, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		calls++
		if len(evs) == 0 {
			break
		}
	}
	holds, _ := s.client.ZCard(ctx, must(s.tag(ns))+"L").Result()
	b.Logf("leased the rest in %d calls; %d entity holds", calls, holds)
	later := now.Add(2 * time.Minute)
	timed(b, fmt.Sprintf("Lease n=1024 with %d lapsed entity holds", holds), func() string {
		evs, err := s.Lease(ctx, ns, later, 1024, time.Minute)
		return fmt.Sprint(len(evs), " events ", err)
	})
	timed(b, "Lease n=1 right after", func() string {
		evs, err := s.Lease(ctx, ns, later, 1, time.Minute)
		return fmt.Sprint(len(evs), " events ", err)
	})
}

func scaleOneEntity(b *testing.B, n int) {
	s := storeAt(&testing.T{}, server.Addr, newPrefix())
	defer s.Close()
	pipeAccept(b, s, n, func(i int) (string, int64) { return "busy", int64(i + 1) })
	accept(&testing.T{}, s, versioned("other", "calm", 1), base.Add(time.Second))
	now := base.Add(time.Minute)
	var held []*dedupe.Event
	timed(b, fmt.Sprintf("Lease n=4 of one entity's %d events", n), func() string {
		held, _ = s.Lease(ctx, ns, now, 4, time.Minute)
		return fmt.Sprintf("%d events", len(held))
	})
	var worst time.Duration
	calls := 0
	for {
		start := time.Now()
		evs, err := s.Lease(ctx, ns, now, 4, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		worst = max(worst, time.Since(start))
		calls++
		if len(evs) > 0 {
			b.Logf("the other entity's event came out after %d Lease calls of n=4 (worst call %v): %v; with the deliverer's 1 s poll after an empty lease that is ~%d s of no delivery at all",
				calls, worst.Round(time.Microsecond), ids(evs), calls-1)
			break
		}
	}
	parked, _ := s.client.ZCard(ctx, must(s.tag(ns))+"b:busy").Result()
	timed(b, fmt.Sprintf("Update Delivered of a holder with %d parked", parked), func() string {
		for _, ev := range held {
			ev.State = dedupe.Superseded
			if err := s.Update(ctx, ev, time.Hour); err != nil {
				return err.Error()
			}
		}
		return "4 updates"
	})
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
