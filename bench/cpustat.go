package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// highSteal is the share of CPU time stolen by the hypervisor above which a round is flagged:
// its figures say more about the neighbours than about hookgate.
const highSteal = 5.0

// highIOWait is the iowait share above which a window is flagged: the CPUs sat idle waiting on
// a disk a neighbour keeps busy, which stalls every fsync of the ledger.
const highIOWait = 20.0

// cpuTimes is the machine's CPU time so far, from /proc/stat's "cpu" line, in ticks.
type cpuTimes struct {
	total, iowait, steal uint64
	ok                   bool
}

// readCPUTimes reads /proc/stat; ok is false where it cannot (not Linux).
func readCPUTimes() cpuTimes {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return cpuTimes{}
	}
	// user nice system idle iowait irq softirq steal [guest guest_nice, already in user and nice]
	var t cpuTimes
	for i, f := range fields[1:9] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return cpuTimes{}
		}
		t.total += n
		switch i {
		case 4:
			t.iowait = n
		case 7:
			t.steal = n
		}
	}
	t.ok = true
	return t
}

// cpuShare is the steal and iowait share of the machine's CPU time over an interval, in %.
type cpuShare struct {
	steal, iowait float64
	ok            bool
}

// since is the share from t0 to t.
func (t cpuTimes) since(t0 cpuTimes) cpuShare {
	if !t.ok || !t0.ok || t.total <= t0.total {
		return cpuShare{}
	}
	total := float64(t.total - t0.total)
	return cpuShare{steal: float64(t.steal-t0.steal) / total * 100, iowait: float64(t.iowait-t0.iowait) / total * 100, ok: true}
}

// String is "1.2" for the steal %, marked when high; "?" when unknown.
func (s cpuShare) String() string {
	if !s.ok {
		return "?"
	}
	if s.steal >= highSteal {
		return fmt.Sprintf("%.1f ⚠", s.steal)
	}
	return fmt.Sprintf("%.1f", s.steal)
}

// iowaitText is the iowait %, marked when high; "?" when unknown.
func (s cpuShare) iowaitText() string {
	if !s.ok {
		return "?"
	}
	if s.iowait >= highIOWait {
		return fmt.Sprintf("%.1f ⚠", s.iowait)
	}
	return fmt.Sprintf("%.1f", s.iowait)
}
