package deliver

import (
	"cmp"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
)

// startMargin is how much of its lease an event must have left, beyond its attempt's timeout,
// to be started: room to record the outcome (see store). An event that waited longer than
// that among the leased-ahead ones is left to lapse and come due again: sent later, another
// worker could have taken it over meanwhile.
const startMargin = outboxTimeout

// UnrecordedPerWorker bounds the events attempted and not yet recorded, per worker: those in
// flight and those whose outcome waits for the store. The store records outcomes in group
// commits, one sync for all that wait, so while one syncs the workers go on and the next group
// gathers; bounded at twice the workers, they stopped at nearly every sync instead. A crash sends
// these events again, as at-least-once allows.
const UnrecordedPerWorker = 8

// leasedEvent is an event leased ahead: leased, not yet started.
type leasedEvent struct {
	ev *dedupe.Event
	// lease is its lease's end, and the context the events leased with it share.
	lease leaseEnd
	// leasedWith is the settings its lease was sized for (see settingsAfterLease).
	leasedWith *settings
}

// queueLeased adds a Lease's events to those leased ahead (d.mu held). Of several events of
// one entity, the newest comes first, so the others find it in work and are postponed (or
// superseded, once it is delivered).
func (d *Deliverer) queueLeased(s *settings, events []*dedupe.Event) {
	events = slices.DeleteFunc(events, func(ev *dedupe.Event) bool { return ev == nil })
	slices.SortStableFunc(events, func(a, b *dedupe.Event) int {
		return cmp.Or(cmp.Compare(a.Entity, b.Entity), cmp.Compare(b.Version, a.Version))
	})
	d.hold(events)
	if len(events) == 0 {
		return
	}
	// Lease moved NextAttempt to the lease's end, one for all the events it hands out.
	until, same := events[0].NextAttempt, 0
	for _, ev := range events {
		if ev.NextAttempt.Equal(until) {
			same++
		}
	}
	shared := d.newLeaseContext(until, same)
	for _, ev := range events {
		lease := leaseEnd{until: ev.NextAttempt}
		if lease.until.Equal(until) {
			lease.ctx = shared
		}
		d.ready = append(d.ready, leasedEvent{ev: ev, lease: lease, leasedWith: s})
	}
}

// dispatch starts the events leased ahead, in order, while the settings in force allow (d.mu
// held): an attempt needs a free slot (Workers of them, one probe while the upstream is
// paused) and, under a rate limit, a start taken for it (takeStart); and the events attempted
// but not yet recorded stay within UnrecordedPerWorker × the workers, so a slow or failing store
// stops the attempts instead of letting them race ahead of what it can record. An event of an
// entity in work needs no slot: it is only postponed.
func (d *Deliverer) dispatch(now time.Time) {
	if d.stopped || d.current.invalid != nil {
		return
	}
	workers := d.current.cfg.Workers
	started := false
	for len(d.ready) > 0 && d.roomToAttempt() {
		next := d.ready[0]
		s := d.settingsAfterLease(next.leasedWith)
		if next.lease.until.Sub(now) < s.cfg.Timeout+startMargin {
			d.popReady()
			d.dropBody(next.ev) // the other events of its Lease may keep the event itself
			next.lease.ctx.done()
			d.logger.Debug("event leased ahead waited too long to start; left to come due again after its lease",
				zap.String("event_id", next.ev.ID), zap.Time("lease_end", next.lease.until))
			continue
		}
		ev := next.ev
		entityBusy := ev.Entity != "" && d.entitiesInWork[ev.Entity]
		if entityBusy && ev.OrderKey != "" {
			// Its key's head, due since the outcome of the one before it, whose entity is still
			// being recorded: it waits for that here (see awaitingEntity).
			d.popReady()
			d.awaitingEntity[ev.Entity] = append(d.awaitingEntity[ev.Entity], next)
			continue
		}
		if !entityBusy {
			if free, _ := d.health.slots(workers, d.attempting, now); free == 0 || !d.usePermit(now) {
				break
			}
		}
		d.popReady()
		started = true
		d.attempts.Add(1)
		if entityBusy {
			d.dropBody(ev) // postponed or superseded, not sent
			d.recording++
			d.run(func() {
				defer d.attempts.Done()
				defer next.lease.ctx.done()
				defer d.recorded("")
				d.postponeUnlessSuperseded(s, ev, next.lease)
			})
			continue
		}
		d.attempting++
		if ev.Entity != "" {
			d.entitiesInWork[ev.Entity] = true
		}
		permit := d.permitUsed
		d.run(func() {
			defer d.attempts.Done()
			defer next.lease.ctx.done()
			defer d.recorded(ev.Entity)
			slot := &upstreamSlot{d: d, ev: ev, held: true, since: now, permit: permit}
			defer slot.release()
			d.process(s, ev, next.lease, slot)
		})
	}
	if started {
		d.Notify() // the lease loop may refill what was leased ahead
	}
}

// roomToAttempt says whether the events attempted and not yet recorded leave room to start
// another (d.mu held): fewer than UnrecordedPerWorker × the workers. The rate limit asks for a
// start only while they do (wantsStart), so the two stop at the same bound: with a tighter one
// of its own, dispatch would find no start and wake the lease loop at once, over and over.
func (d *Deliverer) roomToAttempt() bool {
	return d.attempting+d.recording < UnrecordedPerWorker*d.current.cfg.Workers
}

// idleWait is how long a goroutine whose event's work is done waits for the next event's.
const idleWait = pollInterval

// run runs an event's work (d.mu held) on a goroutine that did an earlier event's and waits for
// the next, or on a new one. A goroutine per event began with a small stack and grew it, copying
// it, on its way into net/http and the store, for every event.
func (d *Deliverer) run(work func()) {
	select {
	case d.idle <- work:
	default:
		go d.worker(work)
	}
}

// worker does work, then the work run hands it, until none came for idleWait or Stop abandoned
// the attempts.
func (d *Deliverer) worker(work func()) {
	var wait *time.Timer
	for {
		work()
		work = nil // what it holds of its event goes now, not with the next event's work
		if wait == nil {
			wait = time.NewTimer(idleWait)
		} else {
			wait.Reset(idleWait)
		}
		select {
		case work = <-d.idle:
		case <-wait.C:
			return
		case <-d.attemptsCtx.Done():
			return
		}
	}
}

// popReady drops the first of the events leased ahead (d.mu held). It moves none of the others,
// as slices.Delete did (a copy of every waiting event per start); append copies the waiting ones
// to a new array only once they outgrow what is left of the old one.
func (d *Deliverer) popReady() {
	d.ready[0] = leasedEvent{} // the event goes with its attempt
	d.ready = d.ready[1:]
}

// upstreamSlot is one event's hold on a worker's slot and on its body, from its start until
// its attempt ends; release gives the slot back, once, to the next event, and drops the body,
// while the outcome is recorded. A nil upstreamSlot holds nothing.
type upstreamSlot struct {
	d    *Deliverer
	ev   *dedupe.Event
	held bool
	// since is when the event started; permit when the start it used was taken (ratelimit.go).
	since, permit time.Time
}

func (s *upstreamSlot) release() {
	if s == nil || !s.held {
		return
	}
	s.held = false
	d := s.d
	now := time.Now()
	d.mu.Lock()
	if took := now.Sub(s.since); d.attemptTakes == 0 {
		d.attemptTakes = took
	} else {
		d.attemptTakes += (took - d.attemptTakes) / 4 // a moving average
	}
	d.attempting--
	d.recording++
	d.dropBody(s.ev)
	d.dispatch(now)
	d.mu.Unlock()
	d.Notify() // a paused upstream's next probe may be leased
}

// recorded ends an event's work once its outcome is recorded (or given up), and frees its
// entity ("" if it held none) for the entity's next event.
func (d *Deliverer) recorded(entity string) {
	d.mu.Lock()
	d.recording--
	if entity != "" {
		delete(d.entitiesInWork, entity)
		if waiting := d.awaitingEntity[entity]; len(waiting) > 0 {
			delete(d.awaitingEntity, entity)
			d.ready = append(waiting, d.ready...) // first: they waited longest
		}
	}
	d.dispatch(time.Now())
	d.mu.Unlock()
}
