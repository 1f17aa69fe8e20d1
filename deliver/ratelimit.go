package deliver

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
)

// Rate bounds how many attempts a route starts: at most Starts in any window of Per, plus one
// at the window's edge. Starts are spaced Per/Starts apart (a bucket of one token), since a
// bucket of Starts tokens refilled over Per could start 2×Starts within one window. The zero
// Rate is no limit.
type Rate struct {
	Starts int
	Per    time.Duration
}

// maxStartsPerSecond bounds a Rate: the store keeps the spacing in microseconds.
const maxStartsPerSecond = 1_000_000

// ParseRate reads "N/s" or "N/m": N attempts per second or per minute, N a positive whole number.
func ParseRate(s string) (Rate, error) {
	count, unit, found := strings.Cut(s, "/")
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute}[unit]
	n, err := strconv.Atoi(count)
	if !found || per == 0 || err != nil || n <= 0 {
		return Rate{}, fmt.Errorf("rate %q: want N/s or N/m, N a positive whole number (20/s, 300/m)", s)
	}
	r := Rate{Starts: n, Per: per}
	if err := r.validate(); err != nil {
		return Rate{}, err
	}
	return r, nil
}

// String writes r as ParseRate reads it ("" for no limit).
func (r Rate) String() string {
	switch {
	case r.Starts == 0:
		return ""
	case r.Per == time.Second:
		return strconv.Itoa(r.Starts) + "/s"
	case r.Per == time.Minute:
		return strconv.Itoa(r.Starts) + "/m"
	}
	return fmt.Sprintf("%d/%v", r.Starts, r.Per)
}

// Drain is how long backlog events take to start at rate r (0 for no limit).
func (r Rate) Drain(backlog int) time.Duration {
	if r.Starts == 0 {
		return 0
	}
	if backlog > int(math.MaxInt64/r.interval()) {
		return math.MaxInt64 // 292 years: more than a Duration holds, not a negative one
	}
	return time.Duration(backlog) * r.interval()
}

// limited says whether r bounds anything.
func (r Rate) limited() bool { return r.Starts > 0 }

// interval is the least time between two starts.
func (r Rate) interval() time.Duration { return r.Per / time.Duration(r.Starts) }

func (r Rate) validate() error {
	switch {
	case r == Rate{}:
		return nil
	case r.Starts <= 0 || r.Per <= 0:
		return fmt.Errorf("rate must be a positive number of attempts per positive period, got %d per %v", r.Starts, r.Per)
	case float64(r.Starts)/r.Per.Seconds() > maxStartsPerSecond:
		return fmt.Errorf("rate %s is above %d/s", r, maxStartsPerSecond)
	}
	return nil
}

// localStarts is a route's rate limit kept in this process, for an outbox that keeps none
// (Badger: one node). It keeps the last start, not the next, so a reload that changes the rate
// spaces the next start by the new interval.
type localStarts struct {
	mu   sync.Mutex
	last time.Time
}

// TakeStart implements dedupe.StartLimiter for one process.
func (l *localStarts) TakeStart(_ context.Context, _ string, interval, ahead time.Duration) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	wait := max(l.last.Add(interval).Sub(now), 0)
	if wait > ahead {
		return wait, nil
	}
	l.last = now.Add(wait)
	return wait, nil
}

// storeRoundTrip is how far apart, at least, the starts a store shared by the nodes (Redis)
// reserves may be used around their reserved times: room for its answer (an fsync with
// appendfsync always, a network), which the interval alone leaves none of at a fast rate.
const storeRoundTrip = 100 * time.Millisecond

// transitRoom widens the spacing of a shared store's starts by what the way from a node to the
// upstream may add to one request and not the next (another node's scheduling and dial under
// load): the bound is judged where the starts arrive, and two Caddy processes on two loaded
// cores put 22 arrivals in one second of 20/s without it.
const transitRoom = 50 * time.Millisecond

// startTiming is how long after asking for it a start may be used, and how far apart the
// limiter spaces the starts for rate r. The bound holds for any use: starts spaced
// (Per+use)/(N+1) apart in the limiter's clock, each used within use of it, put at most N+1
// in any window of Per. A start used as late as use must then be spaced a little more than
// Per/N: a limiter in this process answers at once, so there use is the interval and the
// spacing Per/N exactly. Rounded up to the microsecond the store keeps.
func (d *Deliverer) startTiming(r Rate) (use, spacing time.Duration) {
	use = r.interval()
	var room time.Duration
	if _, local := d.starts.(*localStarts); !local {
		use, room = max(use, storeRoundTrip), transitRoom
	}
	n := time.Duration(r.Starts)
	spacing = (r.Per + use + room + n) / (n + 1) // ceiling
	spacing = (spacing + time.Microsecond - 1).Truncate(time.Microsecond)
	return use, spacing
}

// startsOf is where out keeps the route's rate limit: in the store, shared by every node, when
// it keeps one, else in this process.
func startsOf(out dedupe.Outbox) dedupe.StartLimiter {
	if shared, ok := out.(dedupe.StartLimiter); ok {
		return shared
	}
	return new(localStarts)
}

// takeStart takes a start from the route's limiter when the event next in line could start now
// but for the rate, so dispatch may start it; and says how soon the loop should look again
// (0: the rate holds nothing up). The start is taken outside d.mu: a shared limiter is a
// round trip to the store. A limiter shared by the nodes reserves starts ahead instead
// (ratelimit_shared.go).
func (d *Deliverer) takeStart(ctx context.Context) time.Duration {
	d.mu.Lock()
	if d.shared() {
		defer d.mu.Unlock()
		return d.reserveStarts(ctx, time.Now())
	}
	rate := d.current.cfg.Rate
	asked := time.Now()
	if !d.waitsForRate(asked) {
		d.mu.Unlock()
		return 0
	}
	if wait := d.rateNext.Sub(asked); wait > 0 {
		d.mu.Unlock()
		return wait // this node's own last start, at least, still holds it
	}
	starts := d.starts
	d.mu.Unlock()

	_, spacing := d.startTiming(rate)
	wait, err := starts.TakeStart(ctx, d.namespace, spacing, 0)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.rateAnswered(err) {
		d.rateNext = asked.Add(pollInterval)
		return pollInterval
	}
	if wait > 0 {
		d.rateNext = asked.Add(wait)
		return wait
	}
	// Timed from before the store took it: an attempt starts later than that by the permit's
	// age at most, which stays under use (see startTiming).
	d.permitAt = asked
	d.rateNext = asked.Add(spacing)
	return spacing
}

// rateAnswered says whether the limiter answered, logging when it fails and when it works
// again, not at every retry (d.mu held).
func (d *Deliverer) rateAnswered(err error) bool {
	if err != nil {
		if !d.rateFailing {
			d.logger.Warn("taking a start of the delivery rate failed; retrying", zap.Error(err))
			d.rateFailing = true
		}
		return false
	}
	if d.rateFailing {
		d.logger.Info("taking a start of the delivery rate works again")
		d.rateFailing = false
	}
	return true
}

// waitsForRate says whether an event leased ahead could start now if the rate let it, and no
// permit is held for it (d.mu held).
func (d *Deliverer) waitsForRate(now time.Time) bool {
	return d.wantsStart(now) && !d.permitValid(now)
}

// wantsStart says whether an event leased ahead could start now if the rate let it (d.mu held).
func (d *Deliverer) wantsStart(now time.Time) bool {
	s := d.current
	if !s.cfg.Rate.limited() || s.invalid != nil || d.stopped || len(d.ready) == 0 {
		return false
	}
	free, _ := d.health.slots(s.cfg.Workers, d.attempting, now)
	return free > 0 && d.roomToAttempt()
}

// permitValid says whether the start taken last from this process's limiter may still be used
// (d.mu held): within use of asking for it (see startTiming).
func (d *Deliverer) permitValid(now time.Time) bool {
	use, _ := d.startTiming(d.current.cfg.Rate)
	return !d.permitAt.IsZero() && now.Sub(d.permitAt) < use
}

// usePermit says whether an attempt may start now as far as the rate goes, using up the start
// taken for it (d.mu held).
func (d *Deliverer) usePermit(now time.Time) bool {
	if !d.current.cfg.Rate.limited() {
		return true
	}
	if d.shared() {
		return d.useReservation(now)
	}
	valid := d.permitValid(now)
	d.permitUsed = d.permitAt
	d.permitAt = time.Time{}
	if !valid && !now.Before(d.rateNext) {
		d.Notify() // the loop takes a start now, not at its next poll
	}
	return valid
}

// rateRoom caps n, the events leaseRoom would lease now, to those that can start at the rate
// within half the usable part of their lease (the rest is room for other nodes sharing the
// limit), so that waiting for the rate does not make leases lapse; and leases none while this
// node's next start is further away than that (d.mu held).
func (d *Deliverer) rateRoom(now time.Time, n int) int {
	rate := d.current.cfg.Rate
	if !rate.limited() || n == 0 {
		return n
	}
	usable := d.usableWait
	if usable <= 0 {
		usable = leaseMargin - startMargin
	}
	if d.rateNext.Sub(now) > usable/2 {
		return 0
	}
	fit := max(int(usable/2/rate.interval()), 1)
	return max(min(n, fit-len(d.ready)), 0)
}

// startAgainIfLapsed takes a new start, waiting for the rate, for an event whose start lapsed
// while its entity's delivered version was read (a slow store): sent late on the old start, it
// would crowd the window of the starts taken since. It says whether the event may be sent now;
// if no start comes before the event must start (until), it comes due again after its lease.
func (d *Deliverer) startAgainIfLapsed(s *settings, slot *upstreamSlot, until time.Time, log eventLog) bool {
	rate := s.cfg.Rate
	if !rate.limited() {
		return true
	}
	use, spacing := d.startTiming(rate)
	if time.Since(slot.permit) < use {
		return true
	}
	var ahead time.Duration // one process: a start taken now or none
	if d.shared() {
		ahead = reserveAhead(use, spacing)
	}
	for {
		asked := time.Now()
		if until.Sub(asked) < s.cfg.Timeout+startMargin {
			log.logger().Info("event waited too long for a start of the delivery rate; it comes due again after its lease")
			return false
		}
		wait, err := d.starts.TakeStart(d.attemptsCtx, d.namespace, spacing, ahead)
		if err != nil {
			log.logger().Warn("taking a start of the delivery rate failed; the event comes due again after its lease", zap.Error(err))
			return false
		}
		from, to := d.startWindow(asked, time.Now(), wait, use)
		switch {
		case wait > ahead:
			from = asked.Add(wait - ahead) // none taken: ask again when one may be
		case !time.Now().Before(to):
			continue // taken too slowly to use: see startWindow
		}
		select {
		case <-d.attemptsCtx.Done():
			return false
		case <-time.After(time.Until(from)):
		}
		if wait <= ahead && time.Now().Before(to) {
			return true
		}
	}
}
