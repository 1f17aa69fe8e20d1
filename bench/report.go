package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// printMatrix prints every run, the async delivery notes, the rounds' medians and the targets.
func printMatrix(o options, runs [][]configResult, machine []cpuShare) {
	load := "closed loop (each worker sends its next request when the last is answered)"
	if o.rate > 0 {
		load = fmt.Sprintf("paced at %.0f requests/s in all", o.rate)
	}
	upstream := "the bench's in-process sink (its CPU in the client's column)"
	if o.sink == sinkCaddy {
		upstream = "a second Caddy answering `respond 200` (its access log read after each load)"
	}
	order := "one after another"
	if len(runs) > 1 {
		order = fmt.Sprintf("one after another in %d rounds, each round starting with the next config", len(runs))
	}
	fmt.Printf("Configs run %s, each a fresh Caddy; %v warmup + %v measured; concurrency %d, %s; %d-byte signed JSON bodies, unique event IDs; upstream: %s. Steal and iowait: the machine's, from /proc/stat, during the measured window (⚠ at ≥ %.0f %% steal, ≥ %.0f %% iowait).\n\n",
		order, o.warmup, o.duration, o.concurrency, load, o.bodySize, upstream, highSteal, highIOWait)
	fmt.Println("| round | config | requests | req/s | p50 ms | p99 ms | max ms | errors / non-2xx | Caddy CPU µs/req | client CPU µs/req | steal % | iowait % | idle RSS MiB | RSS after MiB | peak RSS (VmHWM) MiB |")
	fmt.Println("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, round := range runs {
		for _, r := range round {
			fmt.Printf("| %d | %s | %d | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.round, r.name, r.load.requests, r.load.throughput(),
				millis(r.load.p50), millis(r.load.p99), millis(r.load.maxLatency), failureText(r.load),
				perRequest(r.caddyCPU, r.load.requests), perRequest(r.clientCPU, r.load.requests), r.machine, r.machine.iowaitText(),
				r.idleRSS, r.afterRSS, mib(r.peakRSS))
		}
	}
	fmt.Println()
	if len(runs) > 1 {
		var parts []string
		for r, m := range machine {
			parts = append(parts, fmt.Sprintf("round %d %s / %s", r+1, m, m.iowaitText()))
		}
		fmt.Printf("- Steal / iowait over each whole round, %%: %s.\n", strings.Join(parts, "; "))
	}
	for _, round := range runs {
		for _, r := range round {
			printNotes(o, r)
		}
	}
	printMedians(runs)
	printTargets(o, runs)
}

// printNotes prints what one run's table row cannot hold.
func printNotes(o options, r configResult) {
	prefix := r.name
	if r.round > 0 {
		prefix = fmt.Sprintf("round %d, %s", r.round, r.name)
	}
	fmt.Printf("- %s: the ledger disk's fdatasync p99 just before the load, %s ms (%d synced 4 KiB writes).\n", prefix, millis(r.diskSyncP99), syncProbeWrites)
	counted := r.counted.per(r.load.requests)
	if r.countedErr != nil {
		counted = "no allocations or commits (" + r.countedErr.Error() + ")"
	}
	fmt.Printf("- %s, in the measured window: %s", prefix, counted)
	if r.upstreamConns >= 0 {
		fmt.Printf("; %d connections opened to the upstream", r.upstreamConns)
	}
	fmt.Println(".")
	if r.async {
		fmt.Printf("- %s delivery: %d events acknowledged (202, warmup included); the sink had %d distinct when the load stopped, %d after waiting %v (limit %v); %d redeliveries (Hookgate-Attempt > 1).\n",
			prefix, r.load.total2xx, r.sinkAtEnd, r.sinkAfterDrain, r.drainTook.Round(10*time.Millisecond), o.drainWait, r.sinkRetries)
		fmt.Printf("- %s delivered: %s.\n", prefix, r.delivery)
		fmt.Printf("- %s backlog: %s; %d answers 503 in the measured window.\n", prefix, r.backlog, r.load.non2xx[503])
	}
	if r.redisCPU > 0 {
		where := "on the same cores as Caddy and the bench"
		if o.pinned != nil {
			where = "on the bench's CPU, off Caddy's"
		}
		fmt.Printf("- %s: redis-server used %s µs of CPU per request in the measured window (%s).\n",
			prefix, perRequest(r.redisCPU, r.load.requests), where)
	}
	if r.sinkCPU > 0 {
		fmt.Printf("- %s: the sink Caddy used %s µs of CPU in the measured window per request this config answered in it.\n", prefix, perRequest(r.sinkCPU, r.load.requests))
	}
	if r.inlineSigned > 0 {
		fmt.Printf("- %s: %d requests were signed inline (the %d pre-signed ran out or aged).\n", prefix, r.inlineSigned, o.presign)
	}
	if r.load.firstError != "" {
		fmt.Printf("- %s: first transport error: %s\n", prefix, r.load.firstError)
	}
	for _, line := range r.caddyErrors {
		fmt.Printf("- %s: Caddy logged: `%s`\n", prefix, strings.TrimSpace(line))
	}
}

// String says how many of the window's acknowledged events arrived, and how fast.
func (d delivery) String() string {
	s := fmt.Sprintf("%d events acknowledged in the measured window, %d of them at the sink, the last %.2f s after the window's start", d.acked, d.arrived, d.last.Seconds())
	if rate := d.rate(); rate > 0 {
		return s + fmt.Sprintf(": **%.0f events/s delivered** (in that time the sink got %d distinct events in all, the warmup's backlog included: %.0f/s)",
			rate, d.all, float64(d.all)/d.last.Seconds())
	}
	return s + ": incomplete (raise -drain-wait)"
}

// printMedians prints each config's median (min–max) over the rounds, and a "delivered" row
// beside each async config's acknowledgements.
func printMedians(runs [][]configResult) {
	if len(runs) < 2 {
		return
	}
	fmt.Printf("\nMedian (min–max) over the %d rounds; an async config's req/s are its acknowledgements, its \"delivered\" row the events acknowledged in the window per second until the last of them reached the sink.\n\n", len(runs))
	fmt.Println("| config | req/s | p50 ms | p99 ms | Caddy CPU µs/req | client CPU µs/req | redis-server CPU µs/req | sink Caddy CPU µs/req |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	over := func(i int, f func(configResult) (float64, bool), format string) string {
		var values []float64
		for _, round := range runs {
			if v, ok := f(round[i]); ok {
				values = append(values, v)
			}
		}
		return spread(values, format)
	}
	ms := func(d func(configResult) time.Duration) func(configResult) (float64, bool) {
		return func(r configResult) (float64, bool) {
			return float64(d(r)) / float64(time.Millisecond), r.load.requests > 0
		}
	}
	perReq := func(cpu func(configResult) time.Duration) func(configResult) (float64, bool) {
		return func(r configResult) (float64, bool) {
			return float64(cpu(r).Microseconds()) / float64(r.load.requests), r.load.requests > 0 && cpu(r) > 0
		}
	}
	for i, r := range runs[0] {
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.name,
			over(i, func(r configResult) (float64, bool) { return r.load.throughput(), r.load.requests > 0 }, "%.0f"),
			over(i, ms(func(r configResult) time.Duration { return r.load.p50 }), "%.2f"),
			over(i, ms(func(r configResult) time.Duration { return r.load.p99 }), "%.2f"),
			over(i, perReq(func(r configResult) time.Duration { return r.caddyCPU }), "%.0f"),
			over(i, perReq(func(r configResult) time.Duration { return r.clientCPU }), "%.0f"),
			over(i, perReq(func(r configResult) time.Duration { return r.redisCPU }), "%.0f"),
			over(i, perReq(func(r configResult) time.Duration { return r.sinkCPU }), "%.0f"))
		if r.async {
			fmt.Printf("| %s delivered | %s | | | | | | |\n", r.name,
				over(i, func(r configResult) (float64, bool) { return r.delivery.rate(), r.delivery.rate() > 0 }, "%.0f"))
		}
	}
}

// spread is "median (min–max)" of values, the value alone if there is one, "—" if none.
func spread(values []float64, format string) string {
	switch len(values) {
	case 0:
		return "—"
	case 1:
		return fmt.Sprintf(format, values[0])
	}
	sorted := slices.Sorted(slices.Values(values))
	return fmt.Sprintf(format+" ("+format+"–"+format+")", median(sorted), sorted[0], sorted[len(sorted)-1])
}

// median of sorted values (the mean of the middle two for an even count).
func median(sorted []float64) float64 {
	return (sorted[(len(sorted)-1)/2] + sorted[len(sorted)/2]) / 2
}

// perRequest is CPU time per request in microseconds.
func perRequest(cpu time.Duration, requests int64) string {
	if requests == 0 || cpu == 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f", float64(cpu.Microseconds())/float64(requests))
}

// failureText is "0", or the transport errors and non-2xx statuses.
func failureText(r loadResult) string {
	if r.failures() == 0 {
		return "0"
	}
	var parts []string
	if r.errors > 0 {
		parts = append(parts, fmt.Sprintf("%d errors", r.errors))
	}
	var statuses []int
	for s := range r.non2xx {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	for _, s := range statuses {
		parts = append(parts, fmt.Sprintf("%d×%d", r.non2xx[s], s))
	}
	return strings.Join(parts, ", ")
}

// verdict marks a value as meeting its target or not.
func verdict(met bool) string {
	if met {
		return "✅"
	}
	return "❌"
}
