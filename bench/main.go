// Command bench measures hookgate against bare Caddy on this machine: throughput, latency and
// memory of seven configs run one after another (respond, reverse_proxy, hookgate sync and async
// on Badger and on Redis, and async with a small max_pending), and with -ledger the memory and disk use of a ledger holding many events plus whether
// the disk use stays bounded under a short dedupe_ttl. It prints Markdown ready to paste.
//
//	go run ./bench                    # the seven configs, 2s warmup + 10s each
//	go run ./bench -only hookgate-async -cpuprofile /tmp/prof
//	go run ./bench -rate 1000         # latency at the same offered load for every config
//	go run ./bench -rounds 5 -only respond,reverse_proxy,hookgate-sync,hookgate-async
//	go run ./bench -ledger            # 1M events, then a 12m disk-growth run
//
// Every process binds 127.0.0.1 only, and every phase is bounded in time.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// options are the command-line flags.
type options struct {
	caddy       string
	duration    time.Duration
	warmup      time.Duration
	concurrency int
	bodySize    int
	only        string
	presign     int
	drainWait   time.Duration
	cpuProfile  string
	rate        float64
	// rounds is how many times each selected config runs, in alternating rounds.
	rounds int
	// sink is the upstream: "bench" (in-process) or sinkCaddy.
	sink string
	// metricsRounds is how many times the metrics pair runs each of its two configs.
	metricsRounds int

	ledger          bool
	events          int
	maxTime         time.Duration
	ledgerMode      string
	sampleEvery     time.Duration
	ledgerDrainWait time.Duration
	growthDuration  time.Duration
	growthRate      float64
	growthTTL       time.Duration
	entityPerEvent  bool
	versionTTL      time.Duration
	memoryLimit     int64
	upstreamDown    int
	requestTimeout  time.Duration

	// preset is the scheme every request is signed in and every hookgate route verifies.
	preset string
	// pin is the CPU list Caddy runs on (-pin); pinned is what pinBench made of it.
	pin    string
	pinned *pinning
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.caddy, "caddy", "./caddy", "the xcaddy-built Caddy binary with hookgate")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per config")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured load before each config's measured time")
	flag.IntVar(&o.concurrency, "concurrency", 64, "concurrent client connections (closed loop)")
	flag.IntVar(&o.bodySize, "body", 1024, "request body size in bytes (JSON carrying a unique event ID)")
	flag.Float64Var(&o.rate, "rate", 0, "requests per second per config, all workers together (0 = closed loop, as fast as possible); compare latency at a rate every config sustains")
	flag.IntVar(&o.rounds, "rounds", 1, "run the selected configs this many times in rounds, one config after another, each round starting with the next config; prints each run, the median (min–max) per config and each ratio's median over the rounds' ratios")
	flag.StringVar(&o.sink, "sink", "bench", "the upstream of reverse_proxy and of async delivery: bench (in-process, its CPU in the client's column) or "+sinkCaddy+" (a second Caddy answering `respond 200`, its access log read after the load)")
	flag.StringVar(&o.only, "only", "", "comma-separated configs to run (default all: "+strings.Join(configNames(), ",")+", then "+metricsPairName+": the metrics on/off pair)")
	flag.IntVar(&o.metricsRounds, "metrics-rounds", 4, "the metrics pair: rounds of hookgate-sync with metrics on and with metrics off, alternated, each going first in half of them (0 skips the pair unless -only names it)")
	flag.IntVar(&o.presign, "presign", 500000, "requests signed before each config's load, so the load loop does not sign; later ones are signed inline")
	flag.DurationVar(&o.drainWait, "drain-wait", 2*time.Minute, "async: how long at most to wait after the load for the queue to reach the sink (the delivered figure needs every event acknowledged in the window delivered)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "directory: save a CPU profile of Caddy (admin /debug/pprof) during each hookgate config's measured time, and a heap profile after it; in ledger mode a heap profile after the load and a CPU profile of the drain")

	flag.BoolVar(&o.ledger, "ledger", false, "ledger mode: push -events through one hookgate, report RSS and disk use, then run the disk-growth check")
	flag.IntVar(&o.events, "events", 1000000, "ledger mode: events to push (0 skips this part)")
	flag.DurationVar(&o.maxTime, "max-time", 15*time.Minute, "ledger mode: stop pushing events after this long")
	flag.StringVar(&o.ledgerMode, "ledger-config", "hookgate-async", "ledger mode: hookgate-async or hookgate-sync")
	flag.DurationVar(&o.ledgerDrainWait, "ledger-drain-wait", 5*time.Minute, "ledger mode: how long to wait after the load for the async queue to reach the sink")
	flag.DurationVar(&o.sampleEvery, "sample-every", 30*time.Second, "ledger mode: how often to sample RSS and the ledger's disk use")
	flag.DurationVar(&o.growthDuration, "growth-duration", 12*time.Minute, "ledger mode: length of the disk-growth check (0 skips it); value-log GC runs every minute")
	flag.Float64Var(&o.growthRate, "growth-rate", 1000, "ledger mode: events per second during the disk-growth check (0 = as fast as possible)")
	flag.DurationVar(&o.growthTTL, "growth-ttl", 30*time.Second, "ledger mode: dedupe_ttl and forward keep during the disk-growth check")
	flag.BoolVar(&o.entityPerEvent, "entity-per-event", false, "ledger mode: during the disk-growth check, give each event its own entity (version header Webhook-Id header Webhook-Timestamp), so the ledger keeps a version per event")
	flag.DurationVar(&o.versionTTL, "version-ttl", 0, "ledger mode: version_ttl during the disk-growth check with -entity-per-event (0 = the route's default, 720h)")
	flag.Int64Var(&o.memoryLimit, "memory-limit", 0, "ledger mode: run Caddy in a memory cgroup capped at this many MiB, as an edge container would be (Linux, root; 0 = no cap)")
	flag.IntVar(&o.upstreamDown, "upstream-down", 0, "ledger mode: the sink answers 503 (Retry-After: 1) to every delivery until this many events are acknowledged, and 200 from then on, so the async backlog grows to it and then drains while the rest arrive (-1 = until the load ends; 0 = never down)")
	flag.DurationVar(&o.requestTimeout, "request-timeout", 10*time.Second, "ledger mode: each request's timeout; one that times out is a failure, its worker sends the next, and it counts in the longest silence")
	flag.StringVar(&o.preset, "preset", "standard", "the scheme the requests are signed in and the hookgate configs verify (a preset that signs neither the URL nor the method, e.g. standard or stripe)")
	flag.StringVar(&o.pin, "pin", "", "run Caddy on these CPUs (a list such as 0 or 0-1), and the bench's load client, its sink and redis-server on the others, so Caddy's CPU per request is its own (taskset)")
	flag.Parse()
	o.memoryLimit <<= 20
	if o.entityPerEvent && o.preset != "standard" {
		fatalf("-entity-per-event reads the Standard Webhooks headers: it needs -preset standard")
	}
	benchPreset = o.preset
	if o.sink != "bench" && o.sink != sinkCaddy {
		fatalf("-sink must be bench or %s, not %q", sinkCaddy, o.sink)
	}
	return o
}

func main() {
	o := parseFlags()
	if _, err := os.Stat(o.caddy); err != nil {
		fatalf("no Caddy binary at %s (build it with ./xcaddy.sh build): %v", o.caddy, err)
	}
	factory, err := newEventFactory(o.preset, o.bodySize)
	if err != nil {
		fatalf("%v", err)
	}
	if o.pin != "" {
		if o.pinned, err = pinBench(o.pin); err != nil {
			fatalf("%v", err)
		}
	}
	fmt.Printf("<!-- %s; GOMAXPROCS of the client %d; %s; requests signed in the %s scheme; load average before: %s -->\n\n",
		time.Now().Format(time.RFC3339), runtime.GOMAXPROCS(0), o.pinned, o.preset, loadAverage())
	if o.ledger {
		err = runLedgerMode(o, factory)
	} else {
		err = runMatrix(o, factory)
	}
	fmt.Printf("\n<!-- load average after: %s -->\n", loadAverage())
	if err != nil {
		fatalf("%v", err)
	}
}

// loadAverage is /proc/loadavg's first three fields (other work on the machine shows here).
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(raw))
	return strings.Join(fields[:min(3, len(fields))], " ")
}

// progressf reports progress on stderr, keeping stdout for the Markdown.
func progressf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}

// mib formats bytes as MiB, or "?" when unknown (negative).
func mib(n int64) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f", float64(n)/(1<<20))
}

// millis formats a duration in milliseconds.
func millis(d time.Duration) string {
	return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond))
}
