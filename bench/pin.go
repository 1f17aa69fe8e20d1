package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// pinning keeps the Caddy under test off the cores that load it: -pin names Caddy's CPUs, and
// the bench itself (load client, in-process sink) and what it starts beside Caddy (redis-server,
// the sink Caddy) run on the machine's other CPUs, so Caddy's CPU per request is its own and
// no client competes with it for a core.
type pinning struct {
	caddy, rest string // taskset CPU lists
}

// pinBench moves every thread of this process to the CPUs not in caddyCPUs, and returns the
// pinning for startCaddy; children started later (redis-server, the sink Caddy) inherit it.
func pinBench(caddyCPUs string) (*pinning, error) {
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("reading the online CPUs: %w", err)
	}
	all, err := parseCPUList(strings.TrimSpace(string(online)))
	if err != nil {
		return nil, fmt.Errorf("/sys/devices/system/cpu/online: %w", err)
	}
	mine, err := parseCPUList(caddyCPUs)
	if err != nil {
		return nil, fmt.Errorf("-pin %q: %w", caddyCPUs, err)
	}
	var rest []int
	for _, c := range all {
		if !slices.Contains(mine, c) {
			rest = append(rest, c)
		}
	}
	for _, c := range mine {
		if !slices.Contains(all, c) {
			return nil, fmt.Errorf("-pin %q: CPU %d is not online (online: %s)", caddyCPUs, c, strings.TrimSpace(string(online)))
		}
	}
	if len(rest) == 0 {
		return nil, fmt.Errorf("-pin %q leaves no CPU for the load client (online: %s)", caddyCPUs, strings.TrimSpace(string(online)))
	}
	p := &pinning{caddy: cpuList(mine), rest: cpuList(rest)}
	// -a: every thread the Go runtime has started so far; later ones inherit the mask.
	if out, err := exec.Command("taskset", "-a", "-p", "-c", p.rest, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("taskset -a -p -c %s: %v: %s", p.rest, err, out)
	}
	runtime.GOMAXPROCS(len(rest))
	return p, nil
}

// command is args run on Caddy's CPUs.
func (p *pinning) command(args []string) []string {
	if p == nil {
		return args
	}
	return append([]string{"taskset", "-c", p.caddy}, args...)
}

func (p *pinning) String() string {
	if p == nil {
		return "not pinned: Caddy, the load client, the sink and redis-server share every CPU"
	}
	return fmt.Sprintf("pinned: Caddy on CPU %s; the load client, the sink and redis-server on CPU %s", p.caddy, p.rest)
}

// parseCPUList reads a CPU list as taskset and /sys write it: "0", "0-3", "0,2-3".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		last := first
		if err == nil && isRange {
			last, err = strconv.Atoi(hi)
		}
		if err != nil || first < 0 || last < first {
			return nil, fmt.Errorf("%q is not a CPU list such as 0 or 0-1", s)
		}
		for c := first; c <= last; c++ {
			if !slices.Contains(cpus, c) {
				cpus = append(cpus, c)
			}
		}
	}
	slices.Sort(cpus)
	return cpus, nil
}

// cpuList writes cpus as a comma-separated list.
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
