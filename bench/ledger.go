package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// sample is one look at Caddy and its ledger while events stream in.
type sample struct {
	elapsed  time.Duration
	accepted int64 // 2xx answers so far
	failed   int64
	rss      residentSet
	disk     dirUsage
}

// runLedgerMode pushes many events through one hookgate for the memory and disk questions, then
// streams events under a short TTL to see whether the ledger's disk use stays bounded.
func runLedgerMode(o options, factory *eventFactory) error {
	c, err := configByName(o.ledgerMode)
	if err != nil || !c.hookgate || c.redis {
		return fmt.Errorf("-ledger-config must be hookgate-async or hookgate-sync (the ledger questions are Badger's)")
	}
	if o.events > 0 {
		if err := runBulkEvents(o, factory, c); err != nil {
			return err
		}
	}
	if o.growthDuration > 0 {
		return runGrowth(o, factory, c)
	}
	return nil
}

// runBulkEvents pushes o.events events (at most o.maxTime) into a fresh ledger with default TTLs.
func runBulkEvents(o options, factory *eventFactory, c benchConfig) error {
	down := ""
	switch {
	case !c.async || o.upstreamDown == 0:
	case o.upstreamDown < 0 || o.upstreamDown >= o.events:
		down = ", the upstream down (503) until the last is acknowledged"
	default:
		down = fmt.Sprintf(", the upstream down (503) until %d are acknowledged", o.upstreamDown)
	}
	fmt.Printf("### %d events through %s (default dedupe_ttl 72h, keep 24h%s)\n\n", o.events, c.name, down)
	stream, err := startStream(o, c, c.handlers)
	if err != nil {
		return err
	}
	defer stream.close()
	source := &eventSource{factory: factory, limit: uint64(o.events)}
	progressf("%s: pushing %d events, concurrency %d, at most %v", c.name, o.events, o.concurrency, o.maxTime)
	stream.sink.down.Store(down != "")
	plan := loadPlan{concurrency: o.concurrency, duration: o.maxTime, source: source, counters: new(loadCounters)}
	if down != "" && o.upstreamDown > 0 {
		go upWhenAcknowledged(stream.sink, plan.counters, int64(o.upstreamDown))
	}
	res, samples := stream.run(o, plan)
	stream.sink.down.Store(false)
	afterLoadRSS, afterLoadDisk := stream.proc.rss(), mustDiskUsage(stream.proc.ledgerDir())
	deliveredDuringLoad := stream.sink.distinct.Load()
	delivered, drainTook := deliveredDuringLoad, time.Duration(0)
	if o.cpuProfile != "" {
		stream.saveProfiles(o, c.async)
	}
	if c.async {
		progressf("waiting up to %v for the queue to drain (%d of %d delivered)", o.ledgerDrainWait, delivered, res.total2xx)
		drainTook = waitDistinct(stream.sink, res.total2xx, o.ledgerDrainWait)
		delivered = stream.sink.distinct.Load()
	}
	afterDrainRSS, afterDrainDisk := stream.proc.rss(), mustDiskUsage(stream.proc.ledgerDir())

	rows := [][2]string{
		{"events accepted (2xx)", fmt.Sprint(res.total2xx)},
		{"failures", failureText(res)},
		{"load took", fmt.Sprintf("%.0f s (%.0f events/s, p50 %s ms, p99 %s ms)", res.window.Seconds(), res.throughput(), millis(res.p50), millis(res.p99))},
		{"longest silence: no answer of any status", fmt.Sprintf("%s ms (each request timing out after %v)", millis(time.Duration(stream.counters.silence.Load())), o.requestTimeout)},
		{"longest request, answered or timed out", millis(time.Duration(stream.counters.slowest.Load())) + " ms"},
		{"RSS idle, before any event", stream.idleRSS.String() + " MiB"},
		{"RSS right after the load", afterLoadRSS.String() + " MiB"},
		{"RSS after the drain wait", afterDrainRSS.String() + " MiB"},
		{"peak RSS (VmHWM)", mib(stream.proc.mustMemory("VmHWM")) + " MiB"},
		{"ledger du right after the load", mib(afterLoadDisk.total) + " MiB"},
		{"ledger du after the drain wait", fmt.Sprintf("%s MiB (vlog %s in %d files, sst %s in %d files, other %s)", mib(afterDrainDisk.total),
			mib(afterDrainDisk.vlog), afterDrainDisk.vlogFiles, mib(afterDrainDisk.sst), afterDrainDisk.sstFiles, mib(afterDrainDisk.other))},
		{"delivered to the sink (distinct) when the load stopped", fmt.Sprint(deliveredDuringLoad)},
		{"delivered to the sink (distinct) in all", deliveredText(c, delivered, drainTook)},
	}
	if stream.cgroup != nil {
		rows = append(rows, [2]string{"memory cgroup cap", stream.capText(o.memoryLimit)})
	}
	fmt.Println("| measure | value |\n|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s |\n", r[0], r[1])
	}
	fmt.Println()
	if source.next.Load() < uint64(o.events) {
		fmt.Printf("- stopped by -max-time %v after %d of %d events.\n", o.maxTime, source.next.Load(), o.events)
	}
	printSamples(samples)
	stream.printCaddyErrors(c.name)
	return nil
}

// upWhenAcknowledged brings a down sink up once n events are acknowledged, or the load ends
// (s is up again).
func upWhenAcknowledged(s *sink, counters *loadCounters, n int64) {
	for counters.ok2xx.Load() < n && s.down.Load() {
		time.Sleep(10 * time.Millisecond)
	}
	if s.down.Swap(false) {
		progressf("%d events acknowledged: the upstream is up", counters.ok2xx.Load())
	}
}

// runGrowth streams events for o.growthDuration into a ledger whose records expire after
// o.growthTTL, sampling its disk use.
func runGrowth(o options, factory *eventFactory, c benchConfig) error {
	ttl := o.growthTTL.String()
	versions, versionsText := entityConfig(o)
	handlers := func(sink, _ string) string {
		extra := "\tdedupe_ttl " + ttl + "\n" + versions
		if c.async {
			extra += forwardBlock(sink, unboundedMaxPending, "\t\tkeep "+ttl+"\n")
			return hookgateBlock(extra)
		}
		return hookgateBlock(extra) + proxyTo(sink)
	}
	settings := "`dedupe_ttl " + ttl + "`"
	if c.async {
		settings += " and `forward { keep " + ttl + " }`"
	}
	settings += versionsText
	fmt.Printf("\n### Disk growth: %s with %s, %.0f events/s for %v\n\n", c.name, settings, o.growthRate, o.growthDuration)
	stream, err := startStream(o, c, handlers)
	if err != nil {
		return err
	}
	defer stream.close()
	source := &eventSource{factory: factory}
	progressf("%s: disk-growth stream for %v at %.0f events/s", c.name, o.growthDuration, o.growthRate)
	res, samples := stream.run(o, loadPlan{concurrency: o.concurrency, duration: o.growthDuration, rate: o.growthRate, source: source})
	fmt.Printf("%d events accepted (%.0f/s), %s failures, p99 %s ms; %d distinct events had reached the sink when the stream stopped.\n\n",
		res.total2xx, res.throughput(), failureText(res), millis(res.p99), stream.sink.distinct.Load())
	if stream.cgroup != nil {
		fmt.Printf("Memory cgroup cap %s.\n\n", stream.capText(o.memoryLimit))
	}
	printSamples(samples)
	var peak int64
	for _, s := range samples {
		peak = max(peak, s.disk.total)
	}
	if len(samples) > 0 {
		last := samples[len(samples)-1]
		fmt.Printf("\nLedger du: peak %s MiB, last %s MiB (vlog %s in %d files, sst %s in %d files).\n",
			mib(peak), mib(last.disk.total), mib(last.disk.vlog), last.disk.vlogFiles, mib(last.disk.sst), last.disk.sstFiles)
	}
	stream.printCaddyErrors(c.name)
	return nil
}

// entityConfig is the growth check's version lines with -entity-per-event, and how the heading
// says so. The signed ID and timestamp headers make each event a new entity with a version.
func entityConfig(o options) (lines, text string) {
	if !o.entityPerEvent {
		return "", ""
	}
	lines = "\tversion header Webhook-Id header Webhook-Timestamp\n"
	text = ", each event its own entity"
	if o.versionTTL > 0 {
		return lines + "\tversion_ttl " + o.versionTTL.String() + "\n", text + " with `version_ttl " + o.versionTTL.String() + "`"
	}
	return lines, text + " with the default `version_ttl` (720h)"
}

// stream is a Caddy and sink pair fed for a long time.
type stream struct {
	sink    *sink
	proc    *caddyProcess
	cgroup  *memoryCgroup // nil without -memory-limit
	idleRSS residentSet
	target  *url.URL
	// counters are the last run's.
	counters *loadCounters
}

// startStream starts a sink and a Caddy running handlers in front of it.
func startStream(o options, c benchConfig, handlers func(sink, storage string) string) (*stream, error) {
	s, err := startSink()
	if err != nil {
		return nil, err
	}
	s.expect(c.destinations) // an event is delivered once every destination has it
	var cg *memoryCgroup
	if o.memoryLimit > 0 {
		if cg, err = newMemoryCgroup(o.memoryLimit); err != nil {
			s.close()
			return nil, err
		}
	}
	p, err := startCaddy(o.caddy, "", handlers(s.addr(), ""), cg, o.pinned)
	if err != nil {
		s.close()
		if cg != nil {
			cg.remove()
		}
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	st := &stream{sink: s, proc: p, cgroup: cg, target: &url.URL{Scheme: "http", Host: p.siteAddr(), Path: "/hooks/bench"}}
	time.Sleep(time.Second)
	st.idleRSS = p.rss()
	return st, nil
}

// capText says how the run fared under -memory-limit.
func (s *stream) capText(limit int64) string {
	alive := "still running"
	select {
	case <-s.proc.exited:
		alive = "**exited**"
	default:
	}
	return fmt.Sprintf("%s MiB: peak charged %s MiB (anonymous memory and page cache), OOM kills %d, Caddy %s; at the end%s",
		mib(limit), mib(s.cgroup.peak()), s.cgroup.oomKills(), alive, s.cgroup.usage())
}

// run runs plan against the stream's Caddy, sampling every o.sampleEvery.
func (s *stream) run(o options, plan loadPlan) (loadResult, []sample) {
	plan.target = s.target
	plan.timeout = o.requestTimeout
	if plan.counters == nil {
		plan.counters = new(loadCounters)
	}
	s.counters = plan.counters
	start := time.Now()
	done := make(chan struct{})
	var samples []sample
	var wg sync.WaitGroup
	wg.Go(func() {
		ticker := time.NewTicker(o.sampleEvery)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
			}
			smp := sample{elapsed: time.Since(start), accepted: plan.counters.ok2xx.Load(), failed: plan.counters.failed.Load(),
				rss: s.proc.rss(), disk: mustDiskUsage(s.proc.ledgerDir())}
			samples = append(samples, smp)
			progressf("%v: %d accepted, %d failed, %d delivered, longest silence %s ms, RSS %v MiB, ledger %s MiB (vlog %s in %d files, sst %s)%s", smp.elapsed.Round(time.Second),
				smp.accepted, smp.failed, s.sink.distinct.Load(), millis(time.Duration(plan.counters.silence.Load())), smp.rss, mib(smp.disk.total), mib(smp.disk.vlog), smp.disk.vlogFiles, mib(smp.disk.sst), s.cgroup.usage())
		}
	})
	res := runLoad(plan)
	close(done)
	wg.Wait()
	return res, samples
}

// saveProfiles saves Caddy's heap profile after the load and, for async, a CPU profile of the
// first 20s of the drain (delivery with a deep queue), into o.cpuProfile.
func (s *stream) saveProfiles(o options, async bool) {
	heap := filepath.Join(o.cpuProfile, "ledger.heap.pprof")
	if err := s.proc.heapProfile(heap); err != nil {
		progressf("heap profile: %v", err)
	} else {
		progressf("heap profile after the load saved to %s", heap)
	}
	if !async {
		return
	}
	go func() {
		cpu := filepath.Join(o.cpuProfile, "ledger-drain.pprof")
		if err := s.proc.cpuProfile(20*time.Second, cpu); err != nil {
			progressf("cpu profile: %v", err)
			return
		}
		progressf("cpu profile of 20s of the drain saved to %s", cpu)
	}()
}

// printCaddyErrors lists the first error lines Caddy logged.
func (s *stream) printCaddyErrors(name string) {
	for _, line := range s.proc.errorLines(5) {
		fmt.Printf("- %s: Caddy logged: `%s`\n", name, strings.TrimSpace(line))
	}
}

func (s *stream) close() {
	s.proc.stop()
	s.sink.close()
	if s.cgroup != nil {
		s.cgroup.remove()
	}
}

// printSamples prints the samples as a Markdown table.
func printSamples(samples []sample) {
	if len(samples) == 0 {
		return
	}
	fmt.Println("| elapsed | accepted | failed | RSS MiB | ledger du MiB | vlog MiB (files) | sst MiB (files) | other MiB |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range samples {
		fmt.Printf("| %v | %d | %d | %s | %s | %s (%d) | %s (%d) | %s |\n", s.elapsed.Round(time.Second), s.accepted, s.failed,
			s.rss, mib(s.disk.total), mib(s.disk.vlog), s.disk.vlogFiles, mib(s.disk.sst), s.disk.sstFiles, mib(s.disk.other))
	}
}

// mustDiskUsage is diskUsage with errors shown as unknown sizes.
func mustDiskUsage(dir string) dirUsage {
	u, err := diskUsage(dir)
	if err != nil {
		return dirUsage{total: -1, vlog: -1, sst: -1, other: -1}
	}
	return u
}

// deliveredText says how many events the sink got, and how long the drain took (async only).
func deliveredText(c benchConfig, delivered int64, drainTook time.Duration) string {
	if !c.async {
		return fmt.Sprintf("%d (sync)", delivered)
	}
	return fmt.Sprintf("%d (after a drain wait of %v)", delivered, drainTook.Round(time.Second))
}
