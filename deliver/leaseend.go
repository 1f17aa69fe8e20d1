package deliver

import (
	"context"
	"sync/atomic"
	"time"
)

// leaseEnd is the end of an event's lease (until), up to which its outcome may be recorded
// (see store), and the context that ends then, shared by the events of one Lease (nil if none).
type leaseEnd struct {
	until time.Time
	ctx   *leaseContext
}

// leaseContext ends when the lease of one Lease's events does, or outboxTimeout after Stop
// abandons the attempts (recordCtx): what bounds recording their outcomes. One for the events of
// a Lease, rather than a context and its timer made per event, which cost each event four
// allocations and a timer's start and stop; it is released once the last of them is done.
type leaseContext struct {
	context.Context
	cancel context.CancelFunc
	until  time.Time
	// left counts the events of the Lease not yet done with it.
	left atomic.Int32
}

// newLeaseContext makes the context for events events whose lease ends at until (d.mu held).
func (d *Deliverer) newLeaseContext(until time.Time, events int) *leaseContext {
	c := &leaseContext{until: until}
	c.Context, c.cancel = context.WithDeadline(d.recordCtx, until)
	c.left.Store(int32(events))
	return c
}

// done says one event is done with c; nil does nothing.
func (c *leaseContext) done() {
	if c != nil && c.left.Add(-1) == 0 {
		c.cancel()
	}
}

// recordContext is the context that bounds recording an outcome now: until the lease ends, and
// at least outboxTimeout (see store). The shared one does when it ends at the lease's end and
// that is at least outboxTimeout away, as it nearly always is for an event started with
// startMargin left; else one is made.
func (d *Deliverer) recordContext(lease leaseEnd) (context.Context, context.CancelFunc) {
	now := time.Now()
	if c := lease.ctx; c != nil && c.until.Equal(lease.until) && lease.until.Sub(now) >= outboxTimeout {
		return c, func() {}
	}
	return context.WithDeadline(d.recordCtx, later(lease.until, now.Add(outboxTimeout)))
}
