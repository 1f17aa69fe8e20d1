package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// benchConfig is one Caddy configuration under test: the site's handlers, given the sink's
// host:port and the hookgate storage line ("" for the default, Badger).
type benchConfig struct {
	name     string
	handlers func(sink, storage string) string
	// redis configs get a redis-server of their own, fsyncing every write (see redis.go).
	redis bool
	// async configs answer 202 before the sink sees the event; the bench waits for delivery.
	async bool
	// hookgate configs are the ones profiled with -cpuprofile.
	hookgate bool
	// globals are global options beside the admin's (the metrics pair's `hookgate { metrics off }`).
	globals string
}

// hookgateBlock is the hookgate directive every hookgate config uses; extra goes inside it.
func hookgateBlock(extra string) string {
	return "hookgate {\n\tpreset standard\n\tsecret " + benchSecret + "\n\tname bench\n" + extra + "}\n"
}

// syncHandlers and asyncHandlers are hookgate-sync's and hookgate-async's handlers, on either store.
func syncHandlers(sink, storage string) string {
	return hookgateBlock(storage) + "reverse_proxy " + sink
}

func asyncHandlers(sink, storage string) string {
	return hookgateBlock(storage + forwardBlock(sink, unboundedMaxPending))
}

// forwardBlock is the forward directive of the async configs, with lines inside its block.
func forwardBlock(sink string, maxPending int, lines ...string) string {
	return "\tforward http://" + sink + " {\n" + fmt.Sprintf("\t\tmax_pending %d\n", maxPending) + strings.Join(lines, "") + "\t}\n"
}

// unboundedMaxPending is as good as no bound: at saturation hookgate acknowledges several times
// faster than it delivers, and the bench measures the same acknowledging route as before the
// bound existed (the default, 100000, is reached within a 12 s run).
const unboundedMaxPending = 1_000_000_000

// boundedMaxPending is hookgate-async-bounded's max_pending: reached within the warmup at
// saturation, and far above the 16 events the deliverer's workers take at a time.
const boundedMaxPending = 2000

// configs are the configurations, in the order they run.
var configs = []benchConfig{
	{name: "respond", handlers: func(string, string) string { return "respond 200" }},
	{name: "reverse_proxy", handlers: func(sink, _ string) string { return "reverse_proxy " + sink }},
	{name: "hookgate-sync", hookgate: true, handlers: syncHandlers},
	{name: "hookgate-sync-redis", hookgate: true, redis: true, handlers: syncHandlers},
	{name: "hookgate-async", hookgate: true, async: true, handlers: asyncHandlers},
	{name: "hookgate-async-redis", hookgate: true, async: true, redis: true, handlers: asyncHandlers},
	{name: "hookgate-async-bounded", hookgate: true, async: true, handlers: func(sink, storage string) string {
		return hookgateBlock(storage + forwardBlock(sink, boundedMaxPending))
	}},
}

func configNames() []string {
	var names []string
	for _, c := range configs {
		names = append(names, c.name)
	}
	return names
}

// configByName finds a config, or fails.
func configByName(name string) (benchConfig, error) {
	for _, c := range configs {
		if c.name == name {
			return c, nil
		}
	}
	return benchConfig{}, fmt.Errorf("unknown config %q (have %s)", name, strings.Join(configNames(), ", "))
}

// configResult is what one config measured.
type configResult struct {
	name              string
	load              loadResult
	idleRSS, afterRSS residentSet // before the load, and after it (and after the async drain)
	peakRSS           int64       // VmHWM at the end
	async             bool
	sinkAtEnd         int64 // distinct events at the sink when the load stopped
	sinkAfterDrain    int64
	drainTook         time.Duration
	sinkRetries       int64
	inlineSigned      int64
	caddyCPU          time.Duration // Caddy's CPU time during the measured window
	clientCPU         time.Duration // the bench's (client and sink) CPU time during the window
	redisCPU          time.Duration // redis-server's CPU time during the window (redis configs)
	caddyErrors       []string
	backlog           backlogPeak // async: the largest backlog the admin API showed
}

// runMatrix runs the selected configs one after another and prints the tables, then the
// metrics pair (metrics.go) unless -only leaves it out.
func runMatrix(o options, factory *eventFactory) error {
	selected, pair := configs, o.metricsRounds > 0
	if o.only != "" {
		selected, pair = nil, false
		for _, name := range strings.Split(o.only, ",") {
			if strings.TrimSpace(name) == metricsPairName {
				pair = true
				continue
			}
			c, err := configByName(strings.TrimSpace(name))
			if err != nil {
				return err
			}
			selected = append(selected, c)
		}
	}
	source := &eventSource{factory: factory}
	var results []configResult
	for _, c := range selected {
		res, err := runFresh(o, c, source)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	if len(results) > 0 {
		printMatrix(o, results)
	}
	if pair {
		return runMetricsPair(o, source)
	}
	return nil
}

// runFresh runs config c with requests signed recently enough (pre-signing again when they age).
func runFresh(o options, c benchConfig, source *eventSource) (configResult, error) {
	if time.Since(source.presignedAt) > maxPresignAge/2 && o.presign > 0 {
		took, err := source.presign(o.presign)
		if err != nil {
			return configResult{}, err
		}
		progressf("pre-signed %d requests in %v (%.1f µs each, all CPUs)", o.presign, took.Round(time.Millisecond), float64(took.Microseconds())/float64(o.presign))
	}
	res, err := runConfig(o, c, source)
	if err != nil {
		return res, fmt.Errorf("%s: %w", c.name, err)
	}
	return res, nil
}

// runConfig starts Caddy with config c, measures it, and stops it.
func runConfig(o options, c benchConfig, source *eventSource) (configResult, error) {
	res := configResult{name: c.name, async: c.async}
	s, err := startSink()
	if err != nil {
		return res, err
	}
	defer s.close()
	storage, redisCPU := "", func() time.Duration { return 0 }
	if c.redis {
		r, err := startRedis()
		if err != nil {
			return res, err
		}
		defer stopRedis(r)
		storage, redisCPU = redisStorage(r), func() time.Duration { return processCPUTime(r.Pid()) }
	}
	p, err := startCaddy(o.caddy, c.globals, c.handlers(s.addr(), storage), nil)
	if err != nil {
		return res, err
	}
	defer p.stop()
	time.Sleep(time.Second) // let start-up work settle before reading idle RSS
	res.idleRSS = p.rss()

	if o.cpuProfile != "" && c.hookgate {
		go profileDuringWindow(o, p, filepath.Join(o.cpuProfile, c.name+".pprof"))
	}
	source.rewind()
	var watch *backlogWatch
	if c.async {
		watch = watchBacklog(p.adminPort, "bench")
	}
	target := &url.URL{Scheme: "http", Host: p.siteAddr(), Path: "/hooks/bench"}
	progressf("%s: %v warmup + %v measured, concurrency %d", c.name, o.warmup, o.duration, o.concurrency)
	cpuAtWindowStart := make(chan [3]time.Duration, 1) // Caddy's, the bench's and Redis's CPU time
	time.AfterFunc(o.warmup, func() { cpuAtWindowStart <- [3]time.Duration{p.cpuTime(), selfCPUTime(), redisCPU()} })
	res.load = runLoad(loadPlan{target: target, concurrency: o.concurrency, warmup: o.warmup, duration: o.duration, rate: o.rate, source: source})
	select {
	case start := <-cpuAtWindowStart:
		res.caddyCPU, res.clientCPU, res.redisCPU = p.cpuTime()-start[0], selfCPUTime()-start[1], redisCPU()-start[2]
	case <-time.After(time.Second): // cannot happen: the load outlasts the warmup
	}
	res.inlineSigned = source.inline.Load()
	res.sinkAtEnd = s.distinct.Load()
	if c.async {
		res.drainTook = s.waitDistinct(res.load.total2xx, o.drainWait)
		res.sinkAfterDrain = s.distinct.Load()
		res.sinkRetries = s.retries.Load()
		res.backlog = watch.stop()
	}
	res.afterRSS = p.rss()
	res.peakRSS = p.mustMemory("VmHWM")
	if o.cpuProfile != "" && c.hookgate {
		path := filepath.Join(o.cpuProfile, c.name+".heap.pprof")
		if err := p.heapProfile(path); err != nil {
			progressf("heap profile: %v", err)
		} else {
			progressf("heap profile after the run saved to %s", path)
		}
	}
	res.caddyErrors = p.errorLines(5)
	progressf("%s: %.0f req/s, p99 %s ms, %d failures", c.name, res.load.throughput(), millis(res.load.p99), res.load.failures())
	return res, nil
}

// profileDuringWindow saves a CPU profile of the middle of the measured window.
func profileDuringWindow(o options, p *caddyProcess, path string) {
	time.Sleep(o.warmup + time.Second)
	length := min(max(o.duration-2*time.Second, time.Second), 10*time.Second)
	if err := p.cpuProfile(length, path); err != nil {
		progressf("cpu profile: %v", err)
		return
	}
	progressf("cpu profile (%v) saved to %s; read it with: go tool pprof -top %s %s", length, path, o.caddy, path)
}

// printMatrix prints the results table, the async delivery notes and the ratios vs targets.
func printMatrix(o options, results []configResult) {
	load := "closed loop (each worker sends its next request when the last is answered)"
	if o.rate > 0 {
		load = fmt.Sprintf("paced at %.0f requests/s in all", o.rate)
	}
	fmt.Printf("Configs run one after another, each a fresh Caddy; %v warmup + %v measured; concurrency %d, %s; %d-byte signed JSON bodies, unique event IDs.\n\n",
		o.warmup, o.duration, o.concurrency, load, o.bodySize)
	fmt.Println("| config | requests | req/s | p50 ms | p99 ms | max ms | errors / non-2xx | Caddy CPU µs/req | client CPU µs/req | idle RSS MiB | RSS after MiB | peak RSS (VmHWM) MiB |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	byName := map[string]configResult{}
	for _, r := range results {
		byName[r.name] = r
		fmt.Printf("| %s | %d | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.name, r.load.requests, r.load.throughput(),
			millis(r.load.p50), millis(r.load.p99), millis(r.load.maxLatency), failureText(r.load),
			perRequest(r.caddyCPU, r.load.requests), perRequest(r.clientCPU, r.load.requests), r.idleRSS, r.afterRSS, mib(r.peakRSS))
	}
	fmt.Println()
	for _, r := range results {
		if r.async {
			fmt.Printf("- %s delivery: %d events acknowledged (202, warmup included); the sink had %d distinct when the load stopped, %d after waiting %v (limit %v); %d redeliveries (Hookgate-Attempt > 1).\n",
				r.name, r.load.total2xx, r.sinkAtEnd, r.sinkAfterDrain, r.drainTook.Round(10*time.Millisecond), o.drainWait, r.sinkRetries)
			fmt.Printf("- %s backlog: %s; %d answers 503 in the measured window.\n", r.name, r.backlog, r.load.non2xx[503])
		}
		if r.redisCPU > 0 {
			fmt.Printf("- %s: redis-server used %s µs of CPU per request in the measured window (on the same cores as Caddy and the bench).\n",
				r.name, perRequest(r.redisCPU, r.load.requests))
		}
		if r.inlineSigned > 0 {
			fmt.Printf("- %s: %d requests were signed inline (the %d pre-signed ran out or aged).\n", r.name, r.inlineSigned, o.presign)
		}
		if r.load.firstError != "" {
			fmt.Printf("- %s: first transport error: %s\n", r.name, r.load.firstError)
		}
		for _, line := range r.caddyErrors {
			fmt.Printf("- %s: Caddy logged: `%s`\n", r.name, strings.TrimSpace(line))
		}
	}
	printRatios(byName)
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

// printRatios compares hookgate with the bare config it extends, against the targets.
func printRatios(byName map[string]configResult) {
	type pair struct{ hookgate, bare string }
	pairs := []pair{{"hookgate-sync", "reverse_proxy"}, {"hookgate-async", "respond"},
		{"hookgate-sync-redis", "reverse_proxy"}, {"hookgate-async-redis", "respond"},
		{"hookgate-sync-redis", "hookgate-sync"}, {"hookgate-async-redis", "hookgate-async"}}
	targets := map[pair]float64{pairs[0]: 0.85, pairs[1]: 0.80, pairs[2]: 0.85, pairs[3]: 0.80, pairs[4]: 0.80, pairs[5]: 0.80}
	header := "\n| comparison | throughput ratio | target | p99 added ms | target | idle RSS MiB | target |\n|---|---:|---:|---:|---:|---:|---:|"
	for _, pr := range pairs {
		h, okH := byName[pr.hookgate]
		b, okB := byName[pr.bare]
		if !okH || !okB || b.load.throughput() == 0 {
			continue
		}
		if header != "" {
			fmt.Println(header)
			header = ""
		}
		ratio := h.load.throughput() / b.load.throughput()
		added := h.load.p99 - b.load.p99
		fmt.Printf("| %s / %s | %.2f %s | ≥ %.2f | %s %s | ≤ 2 | %s %s | ≤ 64 |\n", pr.hookgate, pr.bare,
			ratio, verdict(ratio >= targets[pr]), targets[pr],
			millis(added), verdict(added <= 2*time.Millisecond), mib(h.idleRSS.total), verdict(h.idleRSS.total <= 64<<20))
	}
}

// verdict marks a value as meeting its target or not.
func verdict(met bool) string {
	if met {
		return "✅"
	}
	return "❌"
}
