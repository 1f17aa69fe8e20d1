package dedupe

import (
	"fmt"
	"strings"
)

// A route delivers each event it accepts to one or more destinations, each with its own queue:
// its own backlog, leases, retries, dead letters and delivered versions. The event is stored
// once (its body once) and is queued for every destination that takes it in the one write that
// accepts it (Claim.Destinations).

// DefaultDestination is the name of a route's destination when it has one unnamed destination.
// Its queue is the route's own namespace, as a route's only queue was before routes had several
// destinations, so a ledger written then keeps its queue and dead letters.
const DefaultDestination = "default"

// maxDestinationLen bounds a destination's name: it is a word operators type.
const maxDestinationLen = 32

// queueSeparator joins a route and a destination in a queue's namespace: a route's name holds
// no NUL, so no route's own namespace looks like a queue's.
const queueSeparator = "\x00@"

// Destination is where a route delivers the events it accepts, as Accept queues them.
type Destination struct {
	// Name is the destination's name: a short word (CheckDestinationName). DefaultDestination
	// is the route's own queue.
	Name string
	// MaxPending, when positive, bounds the destination's backlog: with that many undelivered
	// events queued for it, a new event it would take is Full. 0 means no bound.
	MaxPending int
	// OrderKey, when set, is the event's key in the destination's order (Orderer): its events of
	// one key are delivered one at a time, in the order the ledger accepted them. At most
	// MaxOrderKey bytes. "" delivers it unordered.
	OrderKey string
}

// MaxOrderKey is the longest order key, in bytes.
const MaxOrderKey = 512

// QueueNamespace is the namespace of the queue of route's destination, which the Outbox's queue
// methods (Lease, Update, Get, List, Replay, DeliveredVersion) take and the events they hand out
// carry: route itself for DefaultDestination, else route, a NUL, '@' and the name.
func QueueNamespace(route, destination string) string {
	if destination == DefaultDestination {
		return route
	}
	return route + queueSeparator + destination
}

// SplitQueueNamespace is QueueNamespace's inverse: the route and destination of a queue's
// namespace (DefaultDestination for a route's own).
func SplitQueueNamespace(namespace string) (route, destination string) {
	if route, destination, ok := strings.Cut(namespace, queueSeparator); ok {
		return route, destination
	}
	return namespace, DefaultDestination
}

// CheckDestinationName says why name cannot name a destination: it must be 1 to 32 ASCII
// letters, digits, '-' or '_', starting with a letter or digit.
func CheckDestinationName(name string) error {
	if name == "" || len(name) > maxDestinationLen {
		return fmt.Errorf("destination name %q: must be 1 to %d characters", name, maxDestinationLen)
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case (r == '-' || r == '_') && i > 0:
		default:
			return fmt.Errorf("destination name %q: only letters, digits, '-' and '_' (not first)", name)
		}
	}
	return nil
}

// QueuedDestinations is the destinations Accept queues c's event for: c.Destinations, or the
// route's default destination bounded by c.MaxPending when there are none. It checks their names
// and that no name repeats.
func (c *Claim) QueuedDestinations() ([]Destination, error) {
	if len(c.Destinations) == 0 {
		return []Destination{{Name: DefaultDestination, MaxPending: c.MaxPending}}, nil
	}
	for i, d := range c.Destinations {
		if err := CheckDestinationName(d.Name); err != nil {
			return nil, err
		}
		for _, earlier := range c.Destinations[:i] {
			if earlier.Name == d.Name {
				return nil, fmt.Errorf("destination %q named twice", d.Name)
			}
		}
	}
	return c.Destinations, nil
}
