package main

import (
	"fmt"
	"slices"
	"time"
)

// measure computes a figure from one round's runs by config name; ok is false if the round
// lacks a config it needs.
type measure func(round map[string]configResult) (float64, bool)

// target is one of the bench's targets: a figure computed in each round, compared by its median
// over the rounds.
type target struct {
	what       string
	value      measure
	limit      float64
	atMost     bool   // the figure must be ≤ limit (else ≥)
	saturation bool   // closed loop only: at a rate every config sustains, throughputs are equal
	paced      bool   // -rate only, and met only over at least minPacedRounds rounds
	format     string // of the figure; "%.2f" if empty
}

// minPacedRounds is how many rounds a tail-latency target needs: one round's p99 moves with
// the neighbours' load by more than the targets' margins.
const minPacedRounds = 5

// targets are issue 36's, stated for the pinned mode (-pin), and the idle-memory one. Own CPU is
// Caddy's CPU per request of a hookgate config less reverse_proxy's; an async config's includes
// delivering the event.
var targets = []target{
	{what: "hookgate's own Caddy CPU, µs/req: hookgate-sync − reverse_proxy", value: difference(caddyCPUOf("hookgate-sync"), caddyCPUOf("reverse_proxy")), limit: 30, atMost: true, format: "%.0f"},
	{what: "hookgate's own Caddy CPU, µs/event: hookgate-async (accepted and delivered) − reverse_proxy", value: difference(caddyCPUOf("hookgate-async"), caddyCPUOf("reverse_proxy")), limit: 30, atMost: true, format: "%.0f"},
	{what: "hookgate-sync / reverse_proxy, req/s", value: ratio(throughputOf("hookgate-sync"), throughputOf("reverse_proxy")), limit: 0.85, saturation: true},
	{what: "hookgate-async delivered / reverse_proxy, events/s ÷ req/s", value: ratio(deliveredOf("hookgate-async"), throughputOf("reverse_proxy")), limit: 0.8, saturation: true},
	{what: "hookgate-async-held acks / respond, req/s: the accept path alone, deliveries held back by `rate 1/m`", value: ratio(throughputOf("hookgate-async-held"), throughputOf("respond")), limit: 0.5, saturation: true},
	{what: "hookgate-async-redis / hookgate-async, delivered", value: ratio(deliveredOf("hookgate-async-redis"), deliveredOf("hookgate-async")), limit: 0.8, saturation: true},
	{what: "p99 hookgate-sync − reverse_proxy − the ledger disk's fdatasync p99 (same minute), ms", value: difference(difference(p99Of("hookgate-sync"), p99Of("reverse_proxy")), diskSyncP99Of("hookgate-sync")), limit: 1, atMost: true, paced: true},
	{what: "p99 hookgate-async − reverse_proxy, ms", value: difference(p99Of("hookgate-async"), p99Of("reverse_proxy")), limit: 1, atMost: true, paced: true},
	{what: "largest idle RSS of a hookgate config, MiB", value: largestHookgateIdleRSS, limit: 64, atMost: true, format: "%.1f"},
}

// printTargets prints each target's figure: the median of its per-round values, their range,
// and how many rounds met it.
func printTargets(o options, runs [][]configResult) {
	pinned := ""
	if o.pinned == nil {
		pinned = "; not pinned, while the targets are stated for -pin"
	}
	header := fmt.Sprintf("\n| target (each figure computed per round; the median over %d rounds, min–max%s) | figure | rounds meeting it | target | |\n|---|---:|---:|---:|---|", len(runs), pinned)
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
		if header != "" {
			fmt.Println(header)
			header = ""
		}
		mark := verdict(t.meets(median(slices.Sorted(slices.Values(values)))))
		if t.paced && len(runs) < minPacedRounds {
			mark = fmt.Sprintf("%s (needs ≥ %d rounds)", mark, minPacedRounds)
		}
		op := "≥"
		if t.atMost {
			op = "≤"
		}
		fmt.Printf("| %s | %s | %s | %s "+format+" | %s |\n", t.what, figure, meeting, op, t.limit, mark)
	}
}

// perRound is the target's figure in each round that has it, and how many meet the target.
func (t target) perRound(runs [][]configResult) (values []float64, met int) {
	for _, round := range runs {
		byName := map[string]configResult{}
		for _, r := range round {
			byName[r.name] = r
		}
		if v, ok := t.value(byName); ok {
			values = append(values, v)
			if t.meets(v) {
				met++
			}
		}
	}
	return values, met
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

// diskSyncP99Of is the ledger disk's fdatasync p99 measured just before the config's load, in ms.
func diskSyncP99Of(name string) measure {
	return of(name, func(r configResult) (float64, bool) {
		return float64(r.diskSyncP99) / float64(time.Millisecond), r.diskSyncP99 > 0
	})
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
