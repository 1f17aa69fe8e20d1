package deliver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
)

const (
	// outboxTimeout bounds each outbox call a worker makes, so a stuck store cannot hold a
	// worker (or Stop) forever. Recording an attempt's outcome may take longer, up to the end
	// of the event's lease (see store).
	outboxTimeout = 10 * time.Second
	// entityBusyDelay is how long an event waits while another event of its entity is being
	// worked on, so one entity's events never reach the upstream concurrently (out of order).
	entityBusyDelay = pollInterval
)

// process takes one leased event to its next state: superseded, delivered, due again later, or
// dead. If its outcome cannot be recorded before its lease ends, the lease lapses and
// it is tried again. It releases slot as soon as the upstream is done with the event, before
// the outcome is recorded.
func (d *Deliverer) process(s *settings, ev *dedupe.Event, lease leaseEnd, slot *upstreamSlot) {
	log := eventLog{d.logger, ev.ID}
	if ev.Entity != "" && (d.supersedeIfOutdated(s, ev, lease, slot, log) || !d.startAgainIfLapsed(s, slot, lease.until, log)) {
		return
	}
	result := attempt(d.attemptsCtx, s.client, s.cfg, ev, ev.Attempts+1)
	if result.verdict == abandoned {
		log.logger().Info("attempt abandoned because the deliverer stopped; the event comes due again after its lease")
		return
	}
	d.recordAttempt(s.cfg, ev, result, lease, slot, log)
}

// eventLog logs about one event. The logger naming it is made only when something is logged:
// a delivered event, the common case, logs nothing above debug, and a logger per event (even
// zap's lazy one) cost it five allocations.
type eventLog struct {
	base *zap.Logger
	id   string
}

func (l eventLog) logger() *zap.Logger { return l.base.With(zap.String("event_id", l.id)) }

// supersedeIfOutdated marks ev Superseded, unsent, when its entity already has a newer version
// delivered. It reports whether ev is settled for now: superseded, or left to its lease
// because the delivered version could not be read. A superseded event needs no slot (nil if
// it held none) while it is recorded.
func (d *Deliverer) supersedeIfOutdated(s *settings, ev *dedupe.Event, lease leaseEnd, slot *upstreamSlot, log eventLog) (settled bool) {
	ctx, cancel := context.WithTimeout(d.attemptsCtx, outboxTimeout)
	defer cancel()
	delivered, found, err := d.out.DeliveredVersion(ctx, d.namespace, ev.Entity)
	if err != nil {
		log.logger().Error("reading the entity's delivered version failed; the event comes due again after its lease",
			zap.Error(err))
		return true
	}
	if !found || delivered <= ev.Version {
		return false
	}
	ev.State = dedupe.Superseded
	ev.NextAttempt = time.Time{}
	ev.LastError = fmt.Sprintf("superseded: version %d of the entity was already delivered", delivered)
	ev.UpdatedAt = time.Now()
	slot.release()
	if d.store(ev, s.cfg.Keep, lease, log) {
		d.promoted(ev)
		s.cfg.recorded(ev.State)
	}
	log.logger().Info("event superseded, not sent", zap.Int64("version", ev.Version), zap.Int64("delivered_version", delivered))
	return true
}

// recordAttempt turns the outcome of attempt number ev.Attempts+1 into ev's next state, feeds
// the upstream's health, releases slot (the next attempt then sees that health), and stores
// the state.
func (d *Deliverer) recordAttempt(cfg Config, ev *dedupe.Event, result attemptResult, lease leaseEnd, slot *upstreamSlot, log eventLog) {
	now := time.Now()
	ev.Attempts++
	ev.LastStatus = result.status
	ev.LastError = result.problem
	ev.UpdatedAt = now
	ev.NextAttempt = time.Time{}

	keep := cfg.DeadKeep
	var delay time.Duration
	switch result.verdict {
	case delivered:
		ev.State, keep = dedupe.Delivered, cfg.Keep
		d.upstreamSucceeded()
	case rejected:
		ev.State = dedupe.Dead
	case retryable:
		delay = retryDelay(cfg, ev.Attempts, result.retryAfter, result.hasRetryAfter)
		d.upstreamFailed(cfg.PauseAfter, now.Add(delay))
		if ev.Attempts >= cfg.MaxAttempts {
			ev.State = dedupe.Dead
			ev.LastError = fmt.Sprintf("%s; gave up after %d attempts", result.problem, ev.Attempts)
		} else {
			ev.State, keep = dedupe.Pending, 0 // keep applies to final states only
			ev.NextAttempt = now.Add(delay)
		}
	}
	slot.release()
	ev.OnDead = cfg.OnDead
	if !d.store(ev, keep, lease, log) {
		return
	}
	d.promoted(ev)
	cfg.recorded(ev.State)
	switch ev.State {
	case dedupe.Delivered:
		// Checked first: the fields of a call that logs nothing are allocated all the same.
		if ce := log.base.Check(zap.DebugLevel, "event delivered"); ce != nil {
			ce.Write(zap.String("event_id", ev.ID), zap.Int("attempt", ev.Attempts), zap.Int("status", result.status))
		}
	case dedupe.Dead:
		log.logger().Warn("event dead-lettered", zap.Int("attempts", ev.Attempts),
			zap.Int("last_status", ev.LastStatus), zap.String("last_error", ev.LastError))
	case dedupe.Pending:
		log.logger().Info("attempt failed; retrying", zap.Int("attempt", ev.Attempts), zap.Int("status", result.status),
			zap.String("reason", ev.LastError), zap.Duration("retry_in", delay))
		if delay < pollInterval {
			time.AfterFunc(delay, d.Notify) // sooner than the loop would look on its own
		}
	}
}

// promoted wakes the lease loop once an ordered event's final outcome is stored: the store made
// the next event of its key due in the same write, and a key would otherwise go on at the pace
// of the loop's poll. A dead head that holds its key is logged once, with the key.
func (d *Deliverer) promoted(ev *dedupe.Event) {
	if ev.OrderKey == "" || ev.State == dedupe.Pending {
		return
	}
	if ev.State == dedupe.Dead && ev.OnDead == dedupe.Hold {
		d.logger.Warn("a dead letter holds its key: the events of the key behind it wait until it is replayed or skipped",
			zap.String("event_id", ev.ID), zap.String("order_key", ev.OrderKey))
		return
	}
	d.Notify()
}

// postponeUnlessSuperseded puts ev back, unattempted, for a little while, because another event
// of its entity is being worked on; unless a newer version is already delivered, which makes
// it superseded whatever that other event's fate.
func (d *Deliverer) postponeUnlessSuperseded(s *settings, ev *dedupe.Event, lease leaseEnd) {
	log := eventLog{d.logger, ev.ID}
	if d.supersedeIfOutdated(s, ev, lease, nil, log) {
		return
	}
	ev.NextAttempt = time.Now().Add(entityBusyDelay)
	if d.store(ev, 0, lease, log) {
		log.logger().Debug("event postponed: another event of its entity is in flight")
	}
}

// noRoomDelay is how long an event whose dead-lettering the disk had no room for waits before
// its next attempt.
const noRoomDelay = time.Minute

// store records ev in the outbox (keep is the retention of a final state) and reports whether
// it did. It waits for a slow store until the event's lease ends, and at least
// outboxTimeout: giving up earlier would send a delivered event again for nothing, while
// past the lease another worker may have taken it. Once Stop abandons the attempts, it waits
// outboxTimeout more at most (recordCtx). A failure is logged: the event's lease lapses and it is tried
// again, as at-least-once delivery allows. If another worker did take it (ErrLeaseLost), that
// worker's outcome is the latest and this one is dropped.
func (d *Deliverer) store(ev *dedupe.Event, keep time.Duration, lease leaseEnd, log eventLog) bool {
	ctx, cancel := d.recordContext(lease)
	defer cancel()
	err := d.out.Update(ctx, ev, keep)
	switch {
	case errors.Is(err, dedupe.ErrNoRoom) && ev.State == dedupe.Dead:
		// Dead-lettering copies the body, which a nearly full disk has no room for: the event
		// stays pending and dies once there is room (or is delivered, if the upstream relents).
		log.logger().Warn("dead-lettering postponed: the ledger's disk has no room to keep the body; the event stays pending",
			zap.String("reason", ev.LastError), zap.Duration("retry_in", noRoomDelay))
		ev.State, ev.NextAttempt = dedupe.Pending, time.Now().Add(noRoomDelay)
		d.store(ev, 0, lease, log)
		return false
	case errors.Is(err, dedupe.ErrLeaseLost):
		log.logger().Warn("the event's lease ran out and another worker took it over; this worker's outcome is dropped",
			zap.String("state", string(ev.State)), zap.Time("lease_end", lease.until))
		return false
	case err != nil:
		log.logger().Error("recording the event's state failed; it comes due again after its lease",
			zap.String("state", string(ev.State)), zap.Error(err))
		return false
	}
	return true
}

// upstreamSucceeded records a delivered attempt; it resumes a paused upstream.
func (d *Deliverer) upstreamSucceeded() {
	d.mu.Lock()
	resumed := d.health.succeeded()
	d.mu.Unlock()
	if resumed {
		// WARN, as the pause was: an operator alerted by one sees the other.
		d.logger.Warn("upstream answers again; delivery resumed at full concurrency")
	}
}

// upstreamFailed records a retryable failure whose event is due again at retryAt; enough of them
// in a row pause the upstream.
func (d *Deliverer) upstreamFailed(pauseAfter int, retryAt time.Time) {
	d.mu.Lock()
	paused := d.health.failed(pauseAfter, retryAt)
	failures := d.health.consecutiveFailures
	d.mu.Unlock()
	if paused {
		d.logger.Warn("upstream paused after failures in a row; probing it with one event at a time",
			zap.Int("failures", failures), zap.Duration("probe_in", time.Until(retryAt).Round(time.Millisecond)))
	}
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
