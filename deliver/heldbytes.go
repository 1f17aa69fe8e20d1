package deliver

import (
	"github.com/hookgate/hookgate/dedupe"
)

// maxHeldBytes bounds the bodies a deliverer holds in memory, leased ahead or being sent: no
// more is leased while they fill it. Without it a route would hold up to 3 × workers bodies of
// up to dedupe.MaxPayload (384 MiB at the default 16 workers); 64 MiB is the cap of the
// default body_budget, which bounds the bodies being received. One event is always let
// through, so an event larger than the room left waits only for the others to be sent.
const maxHeldBytes = 64 << 20

// heldSize is what an event leased ahead or being sent holds in memory, as counted against
// maxHeldBytes: its body (its header and fields are small beside the bodies this bound is for).
func heldSize(ev *dedupe.Event) int64 { return int64(len(ev.Body)) }

// withinHeldBytes caps n, the events the lease loop would lease, to what the bodies held leave
// room for (d.mu held), assuming each new event is as large as the largest of the last Lease
// (dedupe.MaxPayload until a Lease brought one; the estimate halves with each Lease of smaller
// events, so one large event does not slow the leases of small ones for long). A Lease is
// not given a size, so this is a forecast: a batch of events larger than the last one's may
// pass the bound, by at most what one Lease hands out (both stores stop at 16 MiB of bodies).
// When nothing is held, at least one event is leased, whatever its size.
func (d *Deliverer) withinHeldBytes(n int) int {
	if n == 0 {
		return 0
	}
	estimate := d.bodyEstimate
	if estimate == 0 {
		estimate = dedupe.MaxPayload
	}
	room := (d.maxHeld - d.heldBytes) / estimate
	if d.heldBytes == 0 {
		room = max(room, 1)
	}
	return int(min(int64(n), max(room, 0)))
}

// hold counts the bodies of events just leased (d.mu held), and sizes the next Lease's events
// on the largest of them.
func (d *Deliverer) hold(events []*dedupe.Event) {
	var largest int64
	for _, ev := range events {
		size := heldSize(ev)
		d.heldBytes += size
		largest = max(largest, size)
	}
	if len(events) > 0 {
		d.bodyEstimate = max(largest, d.bodyEstimate/2, 1) // 1: known, if empty
	}
}

// letGo uncounts the body of an event no longer held (d.mu held): left to its lease, or done
// with (see dropBody).
func (d *Deliverer) letGo(ev *dedupe.Event) {
	d.heldBytes -= heldSize(ev)
}

// dropBody lets go of ev's body and header once its attempt has ended (d.mu held): recording
// the outcome (dedupe.Outbox.Update) needs only its identity and delivery fields, and an event
// whose outcome waits on a slow store should not hold a body of up to dedupe.MaxPayload.
func (d *Deliverer) dropBody(ev *dedupe.Event) {
	d.letGo(ev)
	ev.Body, ev.Header = nil, nil
}
