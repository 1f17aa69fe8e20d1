package redisstore

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// BenchmarkEventCycle measures what one async event costs the store, as the gateway runs it:
// Accepts from 64 concurrent requests, then a deliverer's loop (Lease as many as 16 workers
// have room for, each worker's Update to Delivered); BenchmarkEventCycle64 is the same with 64
// workers, as a busy deliverer runs. Per event and phase it reports the time it
// took, the commands Redis ran (inside scripts too), the script runs and the time Redis spent
// in them (commandstats' usec: the scripts' own work, without the network, the AOF write and
// its fsync, so steadier than the CPU figure), Redis's reads from its clients (with appendfsync
// always, roughly one fsync each), Redis's CPU, the bytes appended to its AOF and sent each way,
// and this process's CPU; -v logs the commands by name, with their µs. Run:
//
//	go test -run '^$' -bench EventCycle -benchtime 20000x ./dedupe/redisstore/
func BenchmarkEventCycle(b *testing.B) { eventCycle(b, 16) }

// BenchmarkEventCycle64 is BenchmarkEventCycle with 64 delivery workers.
func BenchmarkEventCycle64(b *testing.B) { eventCycle(b, 64) }

// eventCycle accepts b.N events and delivers them with workers at a time.
func eventCycle(b *testing.B, workers int) {
	s := storeAt(&testing.T{}, server.Addr, newPrefix())
	body := []byte(`{"type":"invoice.paid","data":"` + strings.Repeat("x", 990) + `"}`)
	evs := make([]*dedupe.Event, b.N)
	for i := range evs {
		id := fmt.Sprintf("evt_%016d", i)
		evs[i] = &dedupe.Event{Namespace: ns, ID: id, Method: "POST", URI: "/hook", Scheme: "standard", Body: body,
			Header: http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {id}, "Webhook-Timestamp": {"1796173865"},
				"Webhook-Signature": {"v1," + strings.Repeat("A", 44)}, "User-Agent": {"bench"}, "Accept-Encoding": {"gzip"}}}
	}
	b.ResetTimer()
	measure(b, s, "accept", len(evs), func() {
		var wg sync.WaitGroup
		next := make(chan *dedupe.Event)
		for range 64 {
			wg.Go(func() {
				for ev := range next {
					c := dedupe.Claim{Namespace: ns, ID: ev.ID, Lease: time.Minute, MaxPending: 1_000_000_000}
					if out, err := s.Accept(ctx, c, ev, time.Hour); err != nil || out != dedupe.Claimed {
						b.Errorf("Accept %s: %v %v", ev.ID, out, err)
					}
				}
			})
		}
		for _, ev := range evs {
			next <- ev
		}
		close(next)
		wg.Wait()
	})
	measure(b, s, "deliver", len(evs), func() { cycleDeliver(b, s, len(evs), workers) })
}

// cycleDeliver leases and marks Delivered n events with up to workers at a time, as the
// deliverer's loop does: it leases as many as there are free workers whenever one is free.
func cycleDeliver(b *testing.B, s *Store, n, workers int) {
	free := make(chan struct{}, workers)
	var wg sync.WaitGroup
	inFlight, done := 0, 0
	for done < n {
		if inFlight == workers {
			<-free
			inFlight, done = inFlight-1, done+1
		}
		for len(free) > 0 {
			<-free
			inFlight, done = inFlight-1, done+1
		}
		leased, err := s.Lease(ctx, ns, time.Now(), workers-inFlight, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		switch {
		case len(leased) == 0 && inFlight > 0:
			<-free
			inFlight, done = inFlight-1, done+1
		case len(leased) == 0 && done < n:
			b.Fatalf("nothing to lease with %d of %d delivered", done, n)
		}
		for _, ev := range leased {
			inFlight++
			wg.Go(func() {
				ev.State, ev.Attempts, ev.LastStatus, ev.UpdatedAt = dedupe.Delivered, 1, 200, time.Now()
				if err := s.Update(ctx, ev, time.Hour); err != nil {
					b.Errorf("Update %s: %v", ev.ID, err)
				}
				free <- struct{}{}
			})
		}
	}
	wg.Wait()
}

// measure runs f, which handles n events, and reports, as phase, Redis's and this process's costs per event.
func measure(b *testing.B, s *Store, phase string, n int, f func()) {
	before, cpuBefore := redisStats(b, s), processCPU()
	b.StartTimer()
	start := time.Now()
	f()
	wall := time.Since(start)
	b.StopTimer()
	after, cpuAfter := redisStats(b, s), processCPU()
	per := func(k string) float64 { return (after[k] - before[k]) / float64(n) }
	report := func(v float64, unit string) { b.ReportMetric(v, phase+"-"+unit) }
	report(float64(wall.Microseconds())/float64(n), "wall-µs/event")
	report(float64(n)/wall.Seconds(), "events/s")
	report(per("cpu")*1e6, "redis-µs/event")
	report(float64((cpuAfter-cpuBefore).Microseconds())/float64(n), "client-µs/event")
	report(per("aof"), "aof-B/event")
	report(per("cmdstat_evalsha")+per("cmdstat_eval"), "scripts/event")
	report(per("usec_evalsha")+per("usec_eval"), "script-µs/event")
	report(per("calls"), "cmds/event")
	report(per("net_in"), "in-B/event")
	report(per("reads"), "reads/event")
	report(per("net_out"), "out-B/event")
	var names []string
	for k := range after {
		if strings.HasPrefix(k, "cmdstat_") && after[k] != before[k] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		name := strings.TrimPrefix(k, "cmdstat_")
		b.Logf("%s: %-16s %6.2f per event, %6.2f µs", phase, name, per(k), per("usec_"+name))
	}
}

// redisStats are the server's counters: each command's calls (cmdstat_NAME), all calls, CPU
// seconds, AOF size and network bytes.
func redisStats(b *testing.B, s *Store) map[string]float64 {
	info, err := s.client.Info(ctx, "commandstats", "cpu", "persistence", "stats").Result()
	if err != nil {
		b.Fatal(err)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			calls, rest, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			usec, _, _ := strings.Cut(strings.TrimPrefix(rest, "usec="), ",")
			c, _ := strconv.ParseFloat(calls, 64)
			u, _ := strconv.ParseFloat(usec, 64)
			if k != "cmdstat_info" {
				m[k] = c
				m["calls"] += c
				m["usec_"+strings.TrimPrefix(k, "cmdstat_")] = u
			}
		case k == "used_cpu_sys" || k == "used_cpu_user":
			c, _ := strconv.ParseFloat(v, 64)
			m["cpu"] += c
		case k == "aof_current_size":
			m["aof"], _ = strconv.ParseFloat(v, 64)
		case k == "total_net_input_bytes":
			m["net_in"], _ = strconv.ParseFloat(v, 64)
		case k == "total_reads_processed":
			m["reads"], _ = strconv.ParseFloat(v, 64)
		case k == "total_net_output_bytes":
			m["net_out"], _ = strconv.ParseFloat(v, 64)
		}
	}
	return m
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
