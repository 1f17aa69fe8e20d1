package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Bounds of one Lease call, so that one script never holds the server for long (Redis runs
// one script at a time): it hands out at most leaseMax events and stops once it has handed out
// leaseBytes of bodies (the first event always goes). One run of the script examines at most
// leaseScan entries more than it may hand out, of the due queue and of the entities whose
// holders lapsed; while a run stops there with fewer than n events handed out (it moved
// waiting events of held entities off the queue, say), the call runs it again, up to
// leaseRounds times, so that other entities' events behind a long run of such do not wait for
// many calls (the deliverer pauses after a call that hands out nothing).
const (
	leaseMax    = 1024
	leaseScan   = 256
	leaseRounds = 32
	leaseBytes  = 16 << 20
)

// Lease implements dedupe.Outbox in one run of a script (more, see leaseRounds). It reads the
// due queue of namespace (a destination's queue, dedupe.QueueNamespace), a sorted set scored by
// due time, from the earliest up to now, so its cost is what it hands out plus a bounded number
// of entries it skips, never the size of the queue. Each event handed out gets a new lease token
// (its delivery hash's count of leases) and is due again at now+lease; the event's deliveries to
// its other destinations are not touched.
//
// One entity's events are never out on two nodes at once from one queue, so they reach the
// destination in order across nodes; each destination's queue holds its entities on its own.
// The events of an entity that one call hands out (the caller's deliverer sends them one at a
// time, newest first, as with Badger) become the entity's holders, with their lease end; while
// their lease is live (compared with now) no later call hands out another event of the entity
// from the queue, on this node or another. Such an event is moved off the queue into the
// entity's waiting set, with its due time, so it costs later scans nothing while it waits;
// once every holder is updated (whatever its state), or their lease lapses, the entity is free
// and its earliest waiting events go back on the queue. Their NextAttempt is unchanged meanwhile.
//
// Each run of the script has a token, kept in the hashes of the events it hands out ("ln"): run
// again by go-redis after a lost reply, it hands out what its first run leased, and reports the
// gone events' entries its first run dropped.
//
// A queue entry whose event's hash is gone (Redis evicted it under an evicting maxmemory-policy,
// someone deleted it, a failover lost it), or the shared hash with its header and body, is
// dropped as the script meets it, and so, over the next calls, are such events' members of the
// Pending listing, so that neither holds up the queue nor counts in Pending; the call reports
// how many it dropped to the OnGoneEvents function. A gone event that was its key's head in an
// ordered queue leaves its key (Q K names it), and the next event of the key is its head, due now.
func (s *Store) Lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("redisstore: lease: lease must be positive, got %v", lease)
	}
	_, q, err := s.queue(namespace)
	if err != nil {
		return nil, fmt.Errorf("redisstore: lease: %w", err)
	}
	if n <= 0 {
		return nil, nil
	}
	n = min(n, leaseMax)
	until := now.Add(lease)
	var out []*dedupe.Event
	bytes, gone := 0, 0
	defer func() {
		if gone > 0 && s.gone != nil {
			s.gone(namespace, gone)
		}
	}()
	for round := range leaseRounds {
		evs, cut, dropped, err := s.leaseRound(ctx, q, namespace, now, n-len(out), until, leaseBytes-bytes)
		gone += dropped
		if err != nil {
			if round > 0 {
				break // what earlier rounds leased is handed out; the next call meets the error again
			}
			return nil, fmt.Errorf("redisstore: lease: %w", err)
		}
		out = append(out, evs...)
		for _, ev := range evs {
			bytes += ev.BodyBytes
		}
		if !cut || len(out) >= n || bytes >= leaseBytes {
			break
		}
	}
	return out, nil
}

// leaseRound runs the lease script once on the queue whose keys start with q, for up to n events and maxBytes of bodies; cut says it
// stopped on its scan budget with fewer than n handed out, so that due entries may be left; gone
// is the number of queue entries of gone events it dropped.
func (s *Store) leaseRound(ctx context.Context, q, namespace string, now time.Time, n int, until time.Time, maxBytes int) (evs []*dedupe.Event, cut bool, gone int, err error) {
	res, err := leaseScript.Run(ctx, s.perRequest, scriptKeys(q, "q", "L", "z", "K", "s:"+string(dedupe.Pending)), micros(now), strconv.Itoa(n),
		micros(until), nanos(until), strconv.Itoa(n+leaseScan), strconv.Itoa(maxBytes), rand.Text()).Slice()
	if err != nil {
		return nil, false, 0, err
	}
	if len(res) < 2 {
		return nil, false, 0, fmt.Errorf("short reply from the script")
	}
	cutFlag, _ := res[0].(int64)
	dropped, _ := res[1].(int64)
	out := make([]*dedupe.Event, 0, len(res)-2)
	for _, r := range res[2:] {
		pairs, ok := r.([]any)
		if !ok || len(pairs)%2 != 0 {
			return nil, false, int(dropped), fmt.Errorf("unexpected reply %T from the script", r)
		}
		fields := make(map[string]string, len(pairs)/2)
		for i := 0; i < len(pairs); i += 2 {
			k, _ := pairs[i].(string)
			v, _ := pairs[i+1].(string)
			fields[k] = v
		}
		ev, err := decodeEvent(namespace, idOfMember(fields[fieldMember]), fields)
		if err != nil {
			return nil, false, int(dropped), err
		}
		out = append(out, ev)
	}
	return out, cutFlag == 1, int(dropped), nil
}

// idOfMember is the event ID in a listing member (listMember).
func idOfMember(member string) string {
	if len(member) < 16 {
		return ""
	}
	return member[16:]
}
