package main

import (
	"fmt"
	"slices"
	"time"
)

// measure computes a figure from one round's runs by config name; ok is false if the round
// lacks a config it needs.
type measure func(round map[string]configResult) (float64, bool)

// target is one of issue 22's targets: a figure computed in each round, compared by its median
// over the rounds (or, with everyRound, by every round's).
type target struct {
	what       string
	value      measure
	limit      float64
	atMost     bool   // the figure must be ≤ limit (else ≥)
	everyRound bool   // met only if every round meets it
	saturation bool   // closed loop only: at a rate every config sustains, throughputs are equal
	paced      bool   // -rate only, and met only over at least minPacedRounds rounds
	format     string // of the figure; "%.2f" if empty
	// ofMedians, if set, replaces value: the figure is the ratio of the medians over the rounds of
	// the two measures, as issue 22 states its tail-latency targets.
	ofMedians *[2]measure
}

// minPacedRounds is how many rounds a tail-latency target needs: one round's p99 moves with
// the neighbours' load by more than the targets' margins.
const minPacedRounds = 5

// targets are issue 22's, with the older Redis-against-Badger and idle-memory ones.
var targets = []target{
	{what: "hookgate-sync / reverse_proxy, req/s", value: ratio(throughputOf("hookgate-sync"), throughputOf("reverse_proxy")), limit: 0.95, everyRound: true, saturation: true},
	{what: "hookgate's own Caddy CPU, µs/req: hookgate-sync − reverse_proxy", value: difference(caddyCPUOf("hookgate-sync"), caddyCPUOf("reverse_proxy")), limit: 22, atMost: true, format: "%.0f"},
	{what: "hookgate-async acks / respond, req/s", value: ratio(throughputOf("hookgate-async"), throughputOf("respond")), limit: 0.6, saturation: true},
	{what: "hookgate-async-held acks / respond, req/s: the accept path alone, deliveries held back by `rate 1/m` (the ceiling of the line above)", value: ratio(throughputOf("hookgate-async-held"), throughputOf("respond")), limit: 0.6, saturation: true},
	{what: "hookgate-async delivered / reverse_proxy, events/s ÷ req/s", value: ratio(deliveredOf("hookgate-async"), throughputOf("reverse_proxy")), limit: 0.8, saturation: true},
	{what: "hookgate-async-redis acks / respond, req/s", value: ratio(throughputOf("hookgate-async-redis"), throughputOf("respond")), limit: 0.6, saturation: true},
	{what: "hookgate-async-redis delivered / reverse_proxy, events/s ÷ req/s", value: ratio(deliveredOf("hookgate-async-redis"), throughputOf("reverse_proxy")), limit: 0.8, saturation: true},
	{what: "hookgate-async-redis / hookgate-async, acks", value: ratio(throughputOf("hookgate-async-redis"), throughputOf("hookgate-async")), limit: 0.8, saturation: true},
	{what: "hookgate-async-redis / hookgate-async, delivered", value: ratio(deliveredOf("hookgate-async-redis"), deliveredOf("hookgate-async")), limit: 0.8, saturation: true},
	{what: "hookgate-async-redis / hookgate-async, Redis's CPU left out: Badger's CPU per ack ÷ the Redis config's, each Caddy's + the client's (+ the sink Caddy's), redis-server's not", value: ratio(cpuOf("hookgate-async"), cpuOf("hookgate-async-redis")), limit: 0.8},
	{what: "hookgate-sync-redis / hookgate-sync, req/s", value: ratio(throughputOf("hookgate-sync-redis"), throughputOf("hookgate-sync")), limit: 0.8, saturation: true},
	{what: "hookgate-sync-redis / hookgate-sync, Redis's CPU left out (as above, per request)", value: ratio(cpuOf("hookgate-sync"), cpuOf("hookgate-sync-redis")), limit: 0.8},
	{what: "p99 hookgate-sync / reverse_proxy, median of the rounds' ratios", value: ratio(p99Of("hookgate-sync"), p99Of("reverse_proxy")), limit: 1.2, atMost: true, paced: true},
	{what: "p99 hookgate-sync / reverse_proxy, ratio of the medians", ofMedians: &[2]measure{p99Of("hookgate-sync"), p99Of("reverse_proxy")}, limit: 1.2, atMost: true, paced: true},
	{what: "p99 hookgate-async / reverse_proxy, median of the rounds' ratios", value: ratio(p99Of("hookgate-async"), p99Of("reverse_proxy")), limit: 1.0, atMost: true, paced: true},
	{what: "p99 hookgate-async / reverse_proxy, ratio of the medians", ofMedians: &[2]measure{p99Of("hookgate-async"), p99Of("reverse_proxy")}, limit: 1.0, atMost: true, paced: true},
	{what: "largest idle RSS of a hookgate config, MiB", value: largestHookgateIdleRSS, limit: 64, atMost: true, format: "%.1f"},
}

// printTargets prints each target's figure: the median of its per-round values, their range,
// and how many rounds met it.
func printTargets(o options, runs [][]configResult) {
	header := fmt.Sprintf("\n| target (each figure computed per round; the median over %d rounds, min–max) | figure | rounds meeting it | target | |\n|---|---:|---:|---:|---|", len(runs))
	for _, t := range targets {
		if t.saturation && o.rate > 0 || t.paced && o.rate == 0 {
			continue
		}
		format := t.format
		if format == "" {
			format = "%.2f"
		}
		values, met := t.perRound(runs)
		if len(values) == 0 {
			continue
		}
		figure, meeting := spread(values, format), fmt.Sprintf("%d of %d", met, len(runs))
		if t.ofMedians != nil {
			figure, meeting = fmt.Sprintf(format, values[0]), fmt.Sprintf("(%d rounds)", met)
		}
		if header != "" {
			fmt.Println(header)
			header = ""
		}
		mark := verdict(t.meets(median(slices.Sorted(slices.Values(values)))))
		switch {
		case t.everyRound:
			mark = verdict(met == len(runs))
		case t.paced && len(runs) < minPacedRounds:
			mark = fmt.Sprintf("%s (needs ≥ %d rounds)", mark, minPacedRounds)
		}
		op := "≥"
		if t.atMost {
			op = "≤"
		}
		every := ""
		if t.everyRound {
			every = " in every round"
		}
		fmt.Printf("| %s | %s | %s | %s "+format+"%s | %s |\n", t.what, figure, meeting, op, t.limit, every, mark)
	}
}

// perRound is the target's figure in each round that has it, and how many meet the target; with
// ofMedians, the one figure and how many rounds it is over.
func (t target) perRound(runs [][]configResult) (values []float64, met int) {
	var num, den []float64
	for _, round := range runs {
		byName := map[string]configResult{}
		for _, r := range round {
			byName[r.name] = r
		}
		if t.ofMedians != nil {
			x, okX := t.ofMedians[0](byName)
			y, okY := t.ofMedians[1](byName)
			if okX && okY {
				num, den = append(num, x), append(den, y)
			}
			continue
		}
		if v, ok := t.value(byName); ok {
			values = append(values, v)
			if t.meets(v) {
				met++
			}
		}
	}
	if t.ofMedians == nil || len(num) == 0 {
		return values, met
	}
	d := median(slices.Sorted(slices.Values(den)))
	if d <= 0 {
		return nil, 0
	}
	return []float64{median(slices.Sorted(slices.Values(num))) / d}, len(num)
}

func (t target) meets(v float64) bool {
	if t.atMost {
		return v <= t.limit
	}
	return v >= t.limit
}

func ratio(a, b measure) measure {
	return func(round map[string]configResult) (float64, bool) {
		x, okA := a(round)
		y, okB := b(round)
		return x / y, okA && okB && y > 0
	}
}

func difference(a, b measure) measure {
	return func(round map[string]configResult) (float64, bool) {
		x, okA := a(round)
		y, okB := b(round)
		return x - y, okA && okB
	}
}

// of applies f to the named config's run, if it ran and answered anything.
func of(name string, f func(configResult) (float64, bool)) measure {
	return func(round map[string]configResult) (float64, bool) {
		r, ok := round[name]
		if !ok || r.load.requests == 0 {
			return 0, false
		}
		return f(r)
	}
}

func throughputOf(name string) measure {
	return of(name, func(r configResult) (float64, bool) { return r.load.throughput(), true })
}

// deliveredOf is the async config's events acknowledged in the window per second until the last
// of them reached the sink.
func deliveredOf(name string) measure {
	return of(name, func(r configResult) (float64, bool) { return r.delivery.rate(), r.delivery.rate() > 0 })
}

func p99Of(name string) measure {
	return of(name, func(r configResult) (float64, bool) { return float64(r.load.p99) / float64(time.Millisecond), true })
}

func caddyCPUOf(name string) measure {
	return of(name, func(r configResult) (float64, bool) {
		return float64(r.caddyCPU.Microseconds()) / float64(r.load.requests), r.caddyCPU > 0
	})
}

// cpuOf is the CPU per request of Caddy, the client and the sink Caddy if any (redis-server's
// left out), in µs.
func cpuOf(name string) measure {
	return of(name, func(r configResult) (float64, bool) {
		return float64((r.caddyCPU + r.clientCPU + r.sinkCPU).Microseconds()) / float64(r.load.requests), r.caddyCPU > 0
	})
}

func largestHookgateIdleRSS(round map[string]configResult) (float64, bool) {
	largest := int64(-1)
	for _, r := range round {
		if c, err := configByName(r.name); err == nil && c.hookgate {
			largest = max(largest, r.idleRSS.total)
		}
	}
	return float64(largest) / (1 << 20), largest >= 0
}
