package deliver

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// leaseLoop leases due events ahead of the workers that will send them (see leaseRoom), until
// ctx ends. Between rounds it sleeps until Notify, a started event, a finished attempt, the
// next probe of a paused upstream or the poll interval, whichever comes first; after a failed
// Lease it backs off. A
// store that stays unavailable (a full disk, a directory another process holds) is logged when it
// fails and when it works again, not at every retry.
func (d *Deliverer) leaseLoop(ctx context.Context) {
	defer close(d.loopDone)
	defer d.reserved.asks.Wait() // a reservation in flight ends with ctx
	timer := time.NewTimer(pollInterval)
	defer timer.Stop()
	var errorBackoff time.Duration
	var lastErr string
	for {
		wait, err := d.leaseDue(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			errorBackoff = min(max(2*errorBackoff, pollInterval), maxLeaseBackoff)
			if err.Error() != lastErr {
				d.logger.Error("leasing due events failed; retrying", zap.Duration("retry_in", errorBackoff), zap.Error(err))
				lastErr = err.Error()
			}
			timer.Reset(errorBackoff)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			continue
		}
		if lastErr != "" {
			d.logger.Info("leasing due events works again")
			lastErr = ""
		}
		errorBackoff = 0
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// leaseDue starts what it can of the events leased ahead, leases more when there is room for
// them, and says how long the loop may sleep before it looks again.
func (d *Deliverer) leaseDue(ctx context.Context) (wait time.Duration, err error) {
	rateIn := d.takeStart(ctx)
	now := time.Now()
	d.mu.Lock()
	s := d.current
	d.dispatch(now)
	n, probeIn := d.leaseRoom(now)
	n = d.withinHeldBytes(n)
	d.mu.Unlock()

	wait = pollInterval
	if probeIn > 0 {
		wait = min(wait, probeIn)
	}
	if rateIn > 0 {
		wait = min(wait, rateIn)
	}
	if n == 0 {
		return wait, nil
	}
	events, err := d.out.Lease(ctx, d.namespace, now, n, s.cfg.Timeout+leaseMargin)
	if err != nil {
		return 0, fmt.Errorf("deliver: lease up to %d events of %q: %w", n, d.namespace, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if ctx.Err() != nil || d.stopped {
		return wait, nil // stopping: what was just leased comes due again after its lease
	}
	if len(events) > 0 && events[0] != nil {
		d.usableWait = events[0].NextAttempt.Sub(now) - (s.cfg.Timeout + startMargin)
	}
	d.queueLeased(s, events)
	d.dispatch(time.Now())
	return wait, nil
}

// leaseRoom is how many events to lease now (d.mu held), and, when none, how long until a
// paused upstream may be probed (0 if unknown). Up to leaseAhead events per worker are leased
// ahead, so a worker whose attempt ends starts the next at once instead of waiting for a
// Lease. They are leased in batches of at least Workers (or whatever is due once all have
// started), not one per finished attempt: each Lease is a synced write, and the loop makes one
// at a time, so the batch size bounds the drain. Fewer are leased ahead when attempts take so
// long that the last would wait past the usable part of its lease (see startMargin) and
// lapse: each lapse costs a Lease and delays the event by a whole lease. While the upstream is
// paused, only a probe is leased, when it may go and none is leased ahead. A rate limit
// leases fewer still: those it lets start soon (rateRoom).
func (d *Deliverer) leaseRoom(now time.Time) (n int, probeIn time.Duration) {
	s := d.current
	if s.invalid != nil {
		return 0, 0
	}
	workers := s.cfg.Workers
	if d.health.paused {
		free, probeIn := d.health.slots(workers, d.attempting, now)
		if len(d.ready) > 0 {
			return 0, probeIn
		}
		return d.rateRoom(now, free), probeIn
	}
	ahead := leaseAhead
	if d.attemptTakes > 0 {
		ahead = min(ahead, int(d.usableWait/d.attemptTakes))
	}
	free, _ := d.health.slots(workers, d.attempting, now)
	room := max(ahead*workers, free) - len(d.ready)
	if len(d.ready) > 0 && room < workers {
		return 0, 0
	}
	return d.rateRoom(now, room), 0
}

// settingsAfterLease is what events leased under s are sent with (d.mu held): the settings in
// force now, since a Configure (a reload) may have landed while the store answered or while
// they waited to start, and once it returns no attempt may start with the settings it replaced
// (a rotated resign secret, a moved upstream). Their timeout stays within the one their lease
// was sized for.
func (d *Deliverer) settingsAfterLease(s *settings) *settings {
	current := d.current
	if current == s || current.cfg.Timeout <= s.cfg.Timeout {
		return current
	}
	capped := *current
	capped.cfg.Timeout = s.cfg.Timeout
	return &capped
}
