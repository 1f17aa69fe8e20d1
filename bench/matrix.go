package main

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
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
	// destinations is how many destinations each event goes to (0: one).
	destinations int
	// orderKeys, when set, spreads the events over that many order keys (header X-Order-Key).
	orderKeys int
}

// benchPreset is the preset every hookgate config verifies (-preset), set once at start.
var benchPreset = "standard"

// hookgateBlock is the hookgate directive every hookgate config uses; extra goes inside it.
func hookgateBlock(extra string) string {
	return "hookgate {\n\tpreset " + benchPreset + "\n\tsecret " + benchSecret + "\n\tname bench\n" + extra + "}\n"
}

// proxyTo is the reverse_proxy of every config that proxies (reverse_proxy, hookgate-sync, and
// the ledger mode's sync stream), one block for all. It keeps
// up to 128 idle connections to the sink (Caddy's default is 32), as docs/operations.md advises in
// front of sync mode: group commits answer a route's requests in bursts, and with 32 kept idle a
// default reverse_proxy behind hookgate closes and opens a connection for about one request in
// eight, some 10 µs of Caddy's CPU per request (the bench prints the connections opened).
func proxyTo(sink string) string {
	return "reverse_proxy " + sink + " {\n\ttransport http {\n\t\tkeepalive_idle_conns_per_host 128\n\t}\n}"
}

// syncHandlers and asyncHandlers are hookgate-sync's and hookgate-async's handlers, on either store.
func syncHandlers(sink, storage string) string {
	return hookgateBlock(storage) + proxyTo(sink)
}

// asyncHandlers' deliveries run 64 at a time (`workers 64`), as many as the requests
// reverse_proxy has in flight to the sink. With the default 16 they fell behind the
// acknowledgements at saturation, so the window's CPU per acknowledgement left out part of the
// deliveries' (BENCHMARKS.md, issue 36); at 64 they keep pace, and it is an event's whole cost.
func asyncHandlers(sink, storage string) string {
	return hookgateBlock(storage + forwardBlock(sink, unboundedMaxPending, "\t\tworkers 64\n"))
}

// destinationForwards is a route's handlers with a named destination for each of names, on the
// sink at /<name> (destinationIndex tells them apart); "down" is an address that refuses every
// connection.
func destinationForwards(names ...string) func(sink, storage string) string {
	return func(sink, storage string) string {
		var forwards string
		for _, name := range names {
			addr := sink
			if name == "down" {
				addr = refusingAddr
			}
			forwards += "\tforward " + name + " http://" + addr + "/" + name + " {\n" + fmt.Sprintf("\t\tmax_pending %d\n", unboundedMaxPending) + "\t}\n"
		}
		return hookgateBlock(storage + forwards)
	}
}

// refusingAddr is where nothing listens: port 1 on loopback refuses every connection.
const refusingAddr = "127.0.0.1:1"

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
	{name: "reverse_proxy", handlers: func(sink, _ string) string { return proxyTo(sink) }},
	{name: "hookgate-sync", hookgate: true, handlers: syncHandlers},
	{name: "hookgate-sync-redis", hookgate: true, redis: true, handlers: syncHandlers},
	{name: "hookgate-async", hookgate: true, async: true, handlers: asyncHandlers},
	{name: "hookgate-async-redis", hookgate: true, async: true, redis: true, handlers: asyncHandlers},
	// Its deliveries are held back by a rate limit, so its acknowledgements measure the accept path
	// alone: the ceiling async acks could reach with no delivery beside them on the same cores.
	// The bench does not wait for its events: they stay queued until Caddy stops.
	{name: "hookgate-async-held", hookgate: true, handlers: func(sink, storage string) string {
		return hookgateBlock(storage + forwardBlock(sink, unboundedMaxPending, "\t\trate 1/m\n"))
	}},
	{name: "hookgate-async-bounded", hookgate: true, async: true, handlers: func(sink, storage string) string {
		return hookgateBlock(storage + forwardBlock(sink, boundedMaxPending))
	}},
	// hookgate-async with three destinations on the same sink, each taking every event: the cost
	// of fan-out beside one destination. An event counts as delivered once all three have it.
	{name: "hookgate-async-3dest", hookgate: true, async: true, destinations: 3, handlers: destinationForwards("a", "b", "c")},
	// Two destinations, alone and beside a third whose upstream refuses every connection for the
	// whole run: the two deliver as promptly either way.
	{name: "hookgate-async-2dest", hookgate: true, async: true, destinations: 2, handlers: destinationForwards("a", "b")},
	{name: "hookgate-async-2dest-1down", hookgate: true, async: true, destinations: 2, handlers: destinationForwards("a", "b", "down")},
	// hookgate-async-bounded with `order`, its events spread over 1, 10 or 10,000 keys: one key is
	// delivered one event at a time, so the bound keeps its backlog (and the drain after the load) short.
	{name: "hookgate-async-ordered-1", hookgate: true, async: true, orderKeys: 1, handlers: orderedHandlers},
	{name: "hookgate-async-ordered-10", hookgate: true, async: true, orderKeys: 10, handlers: orderedHandlers},
	{name: "hookgate-async-ordered-10000", hookgate: true, async: true, orderKeys: 10_000, handlers: orderedHandlers},
}

// orderedHandlers is hookgate-async-bounded's route with its events ordered by the key the load
// sends in X-Order-Key.
func orderedHandlers(sink, storage string) string {
	return hookgateBlock(storage + forwardBlock(sink, boundedMaxPending, "\t\torder header "+orderKeyHeader+"\n"))
}

// defaultConfigs are the configs a run without -only runs: all but the fan-out and ordered ones,
// which answer their own questions (bench/README.md).
func defaultConfigs() []benchConfig {
	var out []benchConfig
	for _, c := range configs {
		if c.destinations == 0 && c.orderKeys == 0 {
			out = append(out, c)
		}
	}
	return out
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
	clientCPU         time.Duration // the bench's (client and in-process sink) CPU time during the window
	redisCPU          time.Duration // redis-server's CPU time during the window (redis configs)
	sinkCPU           time.Duration // the sink Caddy's CPU time during the window (-sink caddy)
	caddyErrors       []string
	backlog           backlogPeak   // async: the largest backlog the admin API showed
	round             int           // 1-based
	machine           cpuShare      // the machine's steal and iowait during the window
	delivery          delivery      // async: what became of the events acknowledged in the window
	diskSyncP99       time.Duration // the ledger disk's fdatasync p99 just before the load (probeSync)
	counted           counters      // Caddy's allocations and group commits in the measured window (scrape.go)
	countedErr        error         // why counted could not be read
	upstreamConns     int64         // connections Caddy opened to the upstream in the measured window (-1: not counted)
}

// runMatrix runs the selected configs one after another and prints the tables, then the
// metrics pair (metrics.go) unless -only leaves it out.
func runMatrix(o options, factory *eventFactory) error {
	selected, pair := defaultConfigs(), o.metricsRounds > 0
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
	rounds := max(o.rounds, 1)
	runs := make([][]configResult, rounds) // by round, then in the order of selected
	machine := make([]cpuShare, rounds)
	for r := range runs {
		start := readCPUTimes()
		runs[r] = make([]configResult, len(selected))
		if rounds > 1 {
			progressf("round %d of %d", r+1, rounds)
		}
		for k := range selected {
			i := (k + r) % len(selected) // round r starts with the r-th config, so none always goes first
			res, err := runFresh(o, selected[i], source)
			if err != nil {
				return err
			}
			res.round = r + 1
			runs[r][i] = res
		}
		machine[r] = readCPUTimes().since(start)
	}
	if len(selected) > 0 {
		printMatrix(o, runs, machine)
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
	s, err := startUpstream(o)
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
	p, err := startCaddy(o.caddy, c.globals, c.handlers(s.addr(), storage), nil, o.pinned)
	if err != nil {
		return res, err
	}
	defer p.stop()
	time.Sleep(time.Second) // let start-up work settle before reading idle RSS
	res.idleRSS = p.rss()
	if _, res.diskSyncP99, err = probeSync(p.root); err != nil {
		return res, err
	}

	if o.cpuProfile != "" && c.hookgate {
		go profileDuringWindow(o, p, filepath.Join(o.cpuProfile, c.name+".pprof"))
	}
	source.rewind()
	source.orderKeys = uint64(c.orderKeys)
	s.received().expect(c.destinations)
	var watch *backlogWatch
	if c.async {
		route := "bench"
		if c.destinations > 1 {
			route += "?dest=a" // one destination's backlog stands for the three, which take the same events
		}
		watch = watchBacklog(p.adminPort, route)
	}
	target := &url.URL{Scheme: "http", Host: p.siteAddr(), Path: "/hooks/bench"}
	progressf("%s: %v warmup + %v measured, concurrency %d", c.name, o.warmup, o.duration, o.concurrency)
	type mark struct {
		caddy, client, redis, sink time.Duration
		machine                    cpuTimes
		counted                    counters
		countedErr                 error
		conns                      int64
	}
	atWindowStart := make(chan mark, 1)
	time.AfterFunc(o.warmup, func() {
		counted, err := scrapeCounters(p.adminPort) // before the CPU marks, so the window does not pay for it
		atWindowStart <- mark{p.cpuTime(), selfCPUTime(), redisCPU(), s.cpuTime(), readCPUTimes(), counted, err, s.connections()}
	})
	res.load = runLoad(loadPlan{target: target, concurrency: o.concurrency, warmup: o.warmup, duration: o.duration, rate: o.rate, source: source})
	stopped := time.Now()
	select {
	case start := <-atWindowStart:
		res.caddyCPU, res.clientCPU, res.redisCPU = p.cpuTime()-start.caddy, selfCPUTime()-start.client, redisCPU()-start.redis
		res.sinkCPU, res.machine = s.cpuTime()-start.sink, readCPUTimes().since(start.machine)
		res.upstreamConns = s.connections() - start.conns
		if start.conns < 0 {
			res.upstreamConns = -1
		}
		now, err := scrapeCounters(p.adminPort)
		if res.countedErr = errors.Join(start.countedErr, err); res.countedErr == nil {
			res.counted = now.since(start.counted)
		}
	case <-time.After(time.Second): // cannot happen: the load outlasts the warmup
	}
	res.inlineSigned = source.inline.Load()
	if c.async {
		res.drainTook = waitDistinct(s, res.load.total2xx, o.drainWait)
		got := s.received()
		res.sinkAtEnd, res.sinkAfterDrain, res.sinkRetries = got.arrivedBy(stopped), got.distinct.Load(), got.retries.Load()
		res.delivery = got.deliveryOf(res.load.acked, res.load.windowStart)
		res.backlog = watch.stop()
	}
	res.load.acked = nil // only the delivery needed them
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
	progressf("%s: %.0f req/s, p99 %s ms, %d failures, steal %s %%", c.name, res.load.throughput(), millis(res.load.p99), res.load.failures(), res.machine)
	if c.async {
		progressf("%s delivered: %s", c.name, res.delivery)
	}
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
