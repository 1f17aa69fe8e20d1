package main

import (
	"fmt"
	"time"
)

// metricsPairName is the -only name of the metrics pair: hookgate-sync with hookgate's metrics on
// (the default) and off (`hookgate { metrics off }`), alternated, to see what metrics cost.
const metricsPairName = "metrics"

// metricsPair are the pair's two configs: hookgate-sync, where a request's CPU is mostly
// hookgate's, so per-request counting shows the most.
var metricsPair = [2]benchConfig{
	{name: "hookgate-sync, metrics on", hookgate: true, handlers: syncHandlers},
	{name: "hookgate-sync, metrics off", hookgate: true, handlers: syncHandlers, globals: "hookgate {\n\tmetrics off\n}"},
}

// runMetricsPair runs the pair's configs -metrics-rounds times each, alternating which goes first
// (on, off; off, on; ...) so that a drift of the machine's load weighs on both alike, and prints
// each run and the cost of metrics over all runs.
func runMetricsPair(o options, source *eventSource) error {
	var runs [2][]configResult
	for round := range o.metricsRounds {
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			res, err := runFresh(o, metricsPair[i], source)
			if err != nil {
				return err
			}
			runs[i] = append(runs[i], res)
		}
	}
	fmt.Printf("\nMetrics on vs off: hookgate-sync run %d times each, alternated (on, off, then off, on, ...), each a fresh Caddy; same load as above.\n\n", o.metricsRounds)
	fmt.Println("| round | metrics on req/s | metrics off req/s | on p99 ms | off p99 ms | on Caddy CPU µs/req | off Caddy CPU µs/req |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	var requests [2]int64
	var took [2]time.Duration
	var cpu [2]time.Duration
	for r := range o.metricsRounds {
		on, off := runs[0][r], runs[1][r]
		fmt.Printf("| %d | %.0f | %.0f | %s | %s | %s | %s |\n", r+1, on.load.throughput(), off.load.throughput(),
			millis(on.load.p99), millis(off.load.p99), perRequest(on.caddyCPU, on.load.requests), perRequest(off.caddyCPU, off.load.requests))
		for i, res := range []configResult{on, off} {
			requests[i] += res.load.requests
			took[i] += res.load.window
			cpu[i] += res.caddyCPU
		}
	}
	if took[0] == 0 || took[1] == 0 || requests[1] == 0 {
		return nil
	}
	on, off := float64(requests[0])/took[0].Seconds(), float64(requests[1])/took[1].Seconds()
	cost := (off - on) / off * 100
	fmt.Printf("| all | %.0f | %.0f | | | %s | %s |\n", on, off, perRequest(cpu[0], requests[0]), perRequest(cpu[1], requests[1]))
	fmt.Printf("\n- Throughput cost of metrics: %.1f %% (%.0f req/s on against %.0f off, all rounds pooled) %s target < 3 %%.\n",
		cost, on, off, verdict(cost < 3))
	return nil
}
