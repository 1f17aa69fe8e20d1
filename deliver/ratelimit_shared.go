package deliver

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// maxReserved is how many starts a node holds or asks for at once from a limiter shared by
// the nodes: two, so that it asks for the next while waiting for the one it holds (the round
// trip then costs no pace), and no more, so that a node does not hoard the rate.
const maxReserved = 2

// reservation is a start reserved in a shared limiter: usable from at until until.
type reservation struct{ at, until time.Time }

// reservations are the starts a node reserved ahead in a limiter shared by the nodes (Redis),
// and not yet used (d.mu held).
type reservations struct {
	held []reservation // earliest first
	// asking counts the reservations asked for and not yet answered; askAfter is when the
	// limiter may be asked again after it had none close enough or failed.
	asking   int
	askAfter time.Time
	// rate is the rate the reservations held and asked for were made under: a reload to another
	// drops them, since they are spaced for the old one.
	rate Rate
	// wasted counts the starts reserved and never used: answered too late to use, or lapsed
	// unused (no event left, no free worker).
	wasted int
	// asks are the reservations in flight, for the lease loop to wait for when it ends.
	asks sync.WaitGroup
}

// shared says whether the route's rate limit is kept where every node sees it (d.mu held).
func (d *Deliverer) shared() bool {
	_, local := d.starts.(*localStarts)
	return !local
}

// reserveAhead is how far ahead a shared limiter reserves a start: enough for this node's two
// reservations at the spacing, or one round trip.
func reserveAhead(use, spacing time.Duration) time.Duration {
	return maxReserved * max(spacing, use)
}

// reserveStarts is takeStart for a shared limiter (d.mu held): it asks for a start while an
// event leased ahead could use it and fewer than maxReserved are held or asked for, in the
// background, so that the loop goes on dispatching during the round trip; and says how soon the
// loop should look again (0: the rate holds nothing up).
func (d *Deliverer) reserveStarts(ctx context.Context, now time.Time) time.Duration {
	r := &d.reserved
	r.dropLapsed(now)
	for d.wantsStart(now) && !now.Before(r.askAfter) && r.asking+len(r.held) < min(maxReserved, len(d.ready)) {
		use, spacing := d.startTiming(d.current.cfg.Rate)
		r.asking++
		r.asks.Add(1)
		go d.reserve(ctx, d.starts, d.current.cfg.Rate, use, spacing, now)
	}
	switch {
	case len(r.held) > 0:
		return max(r.held[0].at.Sub(now), 0)
	case r.asking == 0 && len(d.ready) > 0:
		return max(r.askAfter.Sub(now), 0)
	}
	return 0
}

// reserve asks starts for a start reserved ahead, asked at asked, and holds it for dispatch. The
// reserved time is counted from when the node asked, on its own monotonic clock, so a slow
// answer eats into the wait rather than adding to it. The store took the start somewhen during
// the round trip, so the node's reserved time is early by up to the round trip: a start used
// within use/2 either side of the store's reserved time keeps the bound (see startTiming: the
// starts spread over use at most), so the node uses it from the round trip less use/2 after
// its reserved time until use/2 after it. A start answered too late for that, or after a reload
// to another rate, is wasted.
func (d *Deliverer) reserve(ctx context.Context, starts dedupe.StartLimiter, rate Rate, use, spacing time.Duration, asked time.Time) {
	defer d.reserved.asks.Done()
	defer d.Notify()
	ahead := reserveAhead(use, spacing)
	wait, err := starts.TakeStart(ctx, d.namespace, spacing, ahead)
	replied := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	r := &d.reserved
	r.asking--
	switch {
	case rate != r.rate:
		if err == nil && wait <= ahead {
			r.wasted++
		}
	case !d.rateAnswered(err):
		r.askAfter = asked.Add(pollInterval)
		d.rateNext = r.askAfter
	case wait > ahead:
		r.askAfter = asked.Add(wait - ahead)
		d.rateNext = asked.Add(wait)
	default:
		at, until := d.startWindow(asked, replied, wait, use)
		if !replied.Before(until) {
			r.wasted++
			return
		}
		r.held = append(r.held, reservation{at: at, until: until})
		slices.SortFunc(r.held, func(a, b reservation) int { return a.at.Compare(b.at) })
		d.rateNext = at
	}
}

// startWindow is when a start taken wait after asked, answered at replied, may be used. From
// this process's limiter, answered at once: within use of its time. From a shared one: see
// reserve.
func (d *Deliverer) startWindow(asked, replied time.Time, wait, use time.Duration) (from, to time.Time) {
	if !d.shared() {
		return asked.Add(wait), asked.Add(wait + use)
	}
	return asked.Add(wait + max(replied.Sub(asked)-use/2, 0)), asked.Add(wait + use/2)
}

// reload drops the reservations made under another rate than next (d.mu held): used after the
// reload, they would crowd the new rate's windows, whose first start the limiter spaces from
// the last one reserved.
func (r *reservations) reload(next Rate) {
	if next == r.rate {
		return
	}
	r.rate = next
	r.wasted += len(r.held)
	r.held = nil
	r.askAfter = time.Time{}
}

// dropLapsed drops the reservations no longer usable at now.
func (r *reservations) dropLapsed(now time.Time) {
	kept := slices.DeleteFunc(r.held, func(s reservation) bool { return !now.Before(s.until) })
	r.wasted += len(r.held) - len(kept)
	r.held = kept
}

// useReservation is usePermit for a shared limiter (d.mu held): it uses up the earliest
// reservation if its time has come.
func (d *Deliverer) useReservation(now time.Time) bool {
	r := &d.reserved
	r.dropLapsed(now)
	if len(r.held) == 0 || now.Before(r.held[0].at) {
		if len(r.held) == 0 && r.asking == 0 {
			d.Notify() // the loop asks for a start now, not at its next poll
		}
		return false
	}
	use, _ := d.startTiming(d.current.cfg.Rate)
	d.permitUsed = r.held[0].until.Add(-use) // so startAgainIfLapsed sees it lapse at until
	r.held = r.held[1:]
	return true
}
