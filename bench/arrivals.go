package main

import (
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// arrivals records what reached an upstream: every request, and when each bench event (by
// sequence number) first arrived (at every destination, for a route of several), so the bench
// can tell when the last of a set of acknowledged events was delivered.
type arrivals struct {
	requests atomic.Int64 // every request, duplicates included
	distinct atomic.Int64 // distinct bench event IDs (Hookgate-Event-Id, else Webhook-Id)
	retries  atomic.Int64 // requests carrying Hookgate-Attempt > 1

	mu    sync.Mutex
	first []int64 // unix nanoseconds of each event's arrival at its last destination, by sequence number; 0 = not yet
	// need is how many destinations each event goes to (0 or 1: one); seen marks, per event, the
	// destinations it has reached (bit i: destination i).
	need int
	seen []uint8
}

// expect sets how many destinations each event goes to, before any arrives.
func (a *arrivals) expect(destinations int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.need = destinations
}

// note records a request carrying event id (and Hookgate-Attempt attempt) that arrived at at, at
// destination dest (0 for a route of one).
func (a *arrivals) note(id, attempt string, at int64, dest int) {
	a.requests.Add(1)
	if seq, ok := parseEventID(id); ok && a.markFirst(seq, at, dest) {
		a.distinct.Add(1)
	}
	if n, _ := strconv.Atoi(attempt); n > 1 {
		a.retries.Add(1)
	}
}

// markFirst records seq's arrival at dest at at and reports whether it has now reached every
// destination, for the first time.
func (a *arrivals) markFirst(seq uint64, at int64, dest int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for uint64(len(a.first)) <= seq {
		grow := max(len(a.first), 1<<16)
		a.first = append(a.first, make([]int64, grow)...)
		a.seen = append(a.seen, make([]uint8, grow)...)
	}
	if a.first[seq] != 0 {
		return false
	}
	a.seen[seq] |= 1 << dest
	if bits.OnesCount8(a.seen[seq]) < max(a.need, 1) {
		return false
	}
	a.first[seq] = at
	return true
}

// arrivedBy counts the distinct events that had arrived by t.
func (a *arrivals) arrivedBy(t time.Time) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var n int64
	for _, at := range a.first {
		if at != 0 && at <= t.UnixNano() {
			n++
		}
	}
	return n
}

// delivery is what became of the events acknowledged in a measured window.
type delivery struct {
	acked, arrived int
	last           time.Duration // from the window's start to the last of them arriving
	// all is every event that first arrived in that time, the warmup's backlog included.
	all int
}

// deliveryOf looks up each of acked (sequence numbers answered 2xx in the window starting at
// windowStart) in a.
func (a *arrivals) deliveryOf(acked []uint64, windowStart time.Time) delivery {
	d := delivery{acked: len(acked)}
	var last int64
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, seq := range acked {
		if seq < uint64(len(a.first)) && a.first[seq] != 0 {
			d.arrived++
			last = max(last, a.first[seq])
		}
	}
	if d.arrived == 0 {
		return d
	}
	d.last = time.Duration(last - windowStart.UnixNano())
	for _, at := range a.first {
		if at > windowStart.UnixNano() && at <= last {
			d.all++
		}
	}
	return d
}

// rate is the events acknowledged in the window per second until the last of them arrived; 0 if
// some never arrived (within -drain-wait) or none were acknowledged.
func (d delivery) rate() float64 {
	if d.acked == 0 || d.arrived < d.acked || d.last <= 0 {
		return 0
	}
	return float64(d.acked) / d.last.Seconds()
}
