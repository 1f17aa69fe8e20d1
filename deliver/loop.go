package deliver

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
)

// leaseLoop leases due events while workers are free and hands each to a worker, until ctx
// ends. Between rounds it sleeps until Notify, a finished event, the next probe of a paused
// upstream or the poll interval, whichever comes first; after a failed Lease it backs off. A
// store that stays unavailable (a full disk, a directory another process holds) is logged when it
// fails and when it works again, not at every retry.
func (d *Deliverer) leaseLoop(ctx context.Context) {
	defer close(d.loopDone)
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

// leaseDue leases as many due events as there are free slots, starts a worker for each, and
// says how long the loop may sleep before it looks again.
func (d *Deliverer) leaseDue(ctx context.Context) (wait time.Duration, err error) {
	now := time.Now()
	d.mu.Lock()
	s := d.current
	free, probeIn := 0, time.Duration(0)
	if s.invalid == nil {
		free, probeIn = d.health.slots(s.cfg.Workers, d.inFlight, now)
	}
	d.mu.Unlock()

	wait = pollInterval
	if probeIn > 0 {
		wait = min(wait, probeIn)
	}
	if free == 0 {
		return wait, nil
	}
	events, err := d.out.Lease(ctx, d.namespace, now, free, s.cfg.Timeout+leaseMargin)
	if err != nil {
		return 0, fmt.Errorf("deliver: lease up to %d events of %q: %w", free, d.namespace, err)
	}
	if ctx.Err() != nil {
		return wait, nil // stopping: what was just leased comes due again after its lease
	}
	d.launchAll(d.settingsAfterLease(s), events)
	return wait, nil
}

// settingsAfterLease is what events leased under s are sent with: the settings in force now,
// since a Configure (a reload) may have landed while the store answered, and once it returns
// no attempt may start with the settings it replaced (a rotated resign secret, a moved
// upstream). Their timeout stays within the one their lease was sized for.
func (d *Deliverer) settingsAfterLease(s *settings) *settings {
	d.mu.Lock()
	current := d.current
	d.mu.Unlock()
	if current == s || current.cfg.Timeout <= s.cfg.Timeout {
		return current
	}
	capped := *current
	capped.cfg.Timeout = s.cfg.Timeout
	return &capped
}

// launchAll starts a worker for each leased event. Of several events of one entity, only one
// is worked on at a time, so the upstream never gets them concurrently and out of order; the
// newest goes first, and the others are postponed (or superseded, once it is delivered).
func (d *Deliverer) launchAll(s *settings, events []*dedupe.Event) {
	events = slices.DeleteFunc(events, func(ev *dedupe.Event) bool { return ev == nil })
	slices.SortStableFunc(events, func(a, b *dedupe.Event) int {
		return cmp.Or(cmp.Compare(a.Entity, b.Entity), cmp.Compare(b.Version, a.Version))
	})
	for _, ev := range events {
		d.mu.Lock()
		d.inFlight++
		entityBusy := ev.Entity != "" && d.entitiesInWork[ev.Entity]
		holdsEntity := ev.Entity != "" && !entityBusy
		if holdsEntity {
			d.entitiesInWork[ev.Entity] = true
		}
		d.mu.Unlock()

		d.attempts.Add(1)
		until := ev.NextAttempt // Lease moved it to the end of the lease
		go func() {
			defer d.finish(ev.Entity, holdsEntity)
			if entityBusy {
				d.postponeUnlessSuperseded(s, ev, until)
				return
			}
			d.process(s, ev, until)
		}()
	}
}

// finish frees a worker's slot (and its entity, if it held it) and wakes the loop to fill it.
func (d *Deliverer) finish(entity string, holdsEntity bool) {
	d.mu.Lock()
	d.inFlight--
	if holdsEntity {
		delete(d.entitiesInWork, entity)
	}
	d.mu.Unlock()
	d.Notify()
	d.attempts.Done()
}
