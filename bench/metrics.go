package main

import (
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"
)

// metricsPairName is the -only name of the metrics pair: hookgate-sync with hookgate's metrics on
// (the default) and off (`hookgate { metrics off }`), to see what metrics cost.
const metricsPairName = "metrics"

// metricsPair are the pair's two configs: hookgate-sync, where a request's CPU is mostly
// hookgate's, so per-request counting shows the most.
var metricsPair = [2]benchConfig{
	{name: "metrics on", hookgate: true, handlers: syncHandlers},
	{name: "metrics off", hookgate: true, handlers: syncHandlers, globals: "hookgate {\n\tmetrics off\n}"},
}

// pairRun is what one of the pair measured in one round.
type pairRun struct {
	load loadResult
	cpu  time.Duration // Caddy's CPU time in the measured window
}

// runMetricsPair runs the pair -metrics-rounds times. In each round both configs run at once, a
// fresh Caddy each, each loaded by half the workers from the same signed requests: whatever else
// the machine does weighs on both alike, which configs run one after another cannot promise on
// a shared machine, where a neighbour's load moves throughput by far more than 3 %.
func runMetricsPair(o options, source *eventSource) error {
	var runs [2][]pairRun
	for round := range o.metricsRounds {
		if time.Since(source.presignedAt) > maxPresignAge/2 && o.presign > 0 {
			if _, err := source.presign(o.presign); err != nil {
				return err
			}
		}
		measured, err := runPairRound(o, source, round%2 == 1)
		if err != nil {
			return err
		}
		for i := range measured {
			runs[i] = append(runs[i], measured[i])
		}
	}
	printMetricsPair(o, runs)
	return nil
}

// runPairRound starts both configs (metrics off first if offFirst, so neither is always the
// older process) and loads them together.
func runPairRound(o options, source *eventSource, offFirst bool) ([2]pairRun, error) {
	var out [2]pairRun
	var procs [2]*caddyProcess
	order := []int{0, 1}
	if offFirst {
		order = []int{1, 0}
	}
	for _, i := range order {
		c := metricsPair[i]
		s, err := startSink()
		if err != nil {
			return out, err
		}
		defer s.close()
		p, err := startCaddy(o.caddy, c.globals, c.handlers(s.addr(), ""), nil, o.pinned)
		if err != nil {
			return out, fmt.Errorf("%s: %w", c.name, err)
		}
		defer p.stop()
		procs[i] = p
	}
	time.Sleep(time.Second) // let start-up work settle
	source.rewind()
	progressf("metrics pair: on and off at once, %v warmup + %v measured, concurrency %d each", o.warmup, o.duration, o.concurrency/2)
	var cpuAtStart [2]time.Duration
	startWindow := time.AfterFunc(o.warmup, func() {
		for i, p := range procs {
			cpuAtStart[i] = p.cpuTime()
		}
	})
	defer startWindow.Stop()
	var wg sync.WaitGroup
	for i, p := range procs {
		target := &url.URL{Scheme: "http", Host: p.siteAddr(), Path: "/hooks/bench"}
		wg.Go(func() {
			out[i].load = runLoad(loadPlan{target: target, concurrency: max(o.concurrency/2, 1), warmup: o.warmup, duration: o.duration, rate: o.rate / 2, source: source})
		})
	}
	wg.Wait()
	for i, p := range procs {
		out[i].cpu = p.cpuTime() - cpuAtStart[i]
		progressf("metrics pair, %s: %.0f req/s, %d failures", metricsPair[i].name, out[i].load.throughput(), out[i].load.failures())
	}
	return out, nil
}

// printMetricsPair prints each round and the cost of metrics over all of them.
func printMetricsPair(o options, runs [2][]pairRun) {
	fmt.Printf("\nMetrics on vs off: hookgate-sync with hookgate's metrics on and with `hookgate { metrics off }`, both at once in each of %d rounds, a fresh Caddy each (in turn started first), %d workers each (%v warmup + %v measured).\n\n",
		o.metricsRounds, max(o.concurrency/2, 1), o.warmup, o.duration)
	fmt.Println("| round | metrics on req/s | metrics off req/s | on / off | on p99 ms | off p99 ms | on Caddy CPU µs/req | off Caddy CPU µs/req | failures on / off |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	var requests [2]int64
	var window, cpu [2]time.Duration
	var ratios []float64
	for r := range runs[0] {
		on, off := runs[0][r], runs[1][r]
		ratios = append(ratios, on.load.throughput()/off.load.throughput())
		fmt.Printf("| %d | %.0f | %.0f | %.3f | %s | %s | %s | %s | %d / %d |\n", r+1, on.load.throughput(), off.load.throughput(),
			on.load.throughput()/off.load.throughput(), millis(on.load.p99), millis(off.load.p99),
			perRequest(on.cpu, on.load.requests), perRequest(off.cpu, off.load.requests), on.load.failures(), off.load.failures())
		for i, run := range []pairRun{on, off} {
			requests[i] += run.load.requests
			window[i] += run.load.window
			cpu[i] += run.cpu
		}
	}
	if window[0] == 0 || window[1] == 0 || requests[0] == 0 || requests[1] == 0 {
		return
	}
	on, off := float64(requests[0])/window[0].Seconds(), float64(requests[1])/window[1].Seconds()
	cost := (off - on) / off * 100
	cpuOn, cpuOff := cpu[0].Seconds()/float64(requests[0]), cpu[1].Seconds()/float64(requests[1])
	fmt.Printf("| all | %.0f | %.0f | %.3f | | | %.0f | %.0f | |\n", on, off, on/off, cpuOn*1e6, cpuOff*1e6)
	slices.Sort(ratios)
	median := (ratios[(len(ratios)-1)/2] + ratios[len(ratios)/2]) / 2
	fmt.Printf("\n- Throughput cost of metrics: %.1f %% (%.0f req/s with metrics on against %.0f off, all rounds pooled) %s target < 3 %%; the median round's on / off is %.3f (a cost of %.1f %%); Caddy CPU per request %+.1f %%.\n",
		cost, on, off, verdict(cost < 3), median, (1-median)*100, (cpuOn-cpuOff)/cpuOff*100)
}
