package redisstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// TestRandomAcceptsAndCopiesOfReusedIDs runs, from two nodes, random Accepts and
// DoneAndQueues (dedupe off: a provider resending an ID past its dedupe window) of a few IDs for
// random sets of a route's three destinations, leases, updates (final states kept a short real
// time, so deliveries and shared bodies expire between steps), replays and gets. Each event has
// a body of its own and a unique AcceptedAt, so every delivery Redis hands out or shows can be
// checked against the event that queued it: a delivery serves its own event's body, a Pending
// or Dead delivery always has its body, and no Lease reports a gone event (nothing is evicted).
// After every step the shared hashes are checked: a Pending delivery that shares one finds it,
// kept for good and naming its destination; a Dead one finds it kept at least as long.
func TestRandomAcceptsAndCopiesOfReusedIDs(t *testing.T) {
	t.Parallel()
	seeds := uint64(4)
	if n, err := strconv.Atoi(os.Getenv("MODEL_SEEDS")); err == nil && n > 0 {
		seeds = uint64(n)
	}
	srv := redistest.Run(t, redistest.Durable...)
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			copiesRun(t, srv.Addr, seed, 500)
		})
	}
}

func copiesRun(t *testing.T, addr string, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 34))
	prefix := newPrefix()
	a, b := storeAt(t, addr, prefix), storeAt(t, addr, prefix)
	var gone atomic.Int64
	for _, s := range []*Store{a, b} {
		s.OnGoneEvents(func(string, int) { gone.Add(1) })
	}
	nodes := []*Store{a, b}
	tag, _ := a.tag(ns)
	names := []string{dedupe.DefaultDestination, "billing", "analytics"}
	queues := make([]string, len(names))
	for i, n := range names {
		queues[i] = dedupe.QueueNamespace(ns, n)
	}
	idPool := []string{"x0", "x1", "x2", "x3"}
	bodies := map[int64][]byte{} // by AcceptedAt (ns)
	now := base.Add(time.Hour)
	const leaseFor = 10 * time.Second
	type held struct {
		ev    *dedupe.Event
		until time.Time
	}
	out := map[string]*held{} // queue \0\0 id
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		tail := log[max(0, len(log)-30):]
		t.Fatalf("seed %d: "+format+"\nlast steps:\n%s", append([]any{seed}, append(args, strings.Join(tail, "\n"))...)...)
	}
	checkBody := func(what string, ev *dedupe.Event) {
		want, ok := bodies[ev.AcceptedAt.UnixNano()]
		switch {
		case !ok:
			fail("%s: %s in %q accepted at %v, which no call queued", what, ev.ID, ev.Namespace, ev.AcceptedAt)
		case !bytes.Equal(ev.Body, want):
			fail("%s: %s in %q (%s) serves body %s, want its own event's %s", what, ev.ID, ev.Namespace, ev.State, ev.Body, want)
		}
	}
	serial := 0
	for step := range steps {
		switch r := rng.IntN(100); {
		case r < 25: // Accept or DoneAndQueue of a reused ID
			id := idPool[rng.IntN(len(idPool))]
			serial++
			at := base.Add(time.Duration(serial) * time.Millisecond)
			ev := queued(id, at)
			ev.Body = []byte(fmt.Sprintf(`{"id":%q,"serial":%d}`, id, serial))
			bodies[at.UnixNano()] = ev.Body
			c := dedupe.Claim{Namespace: ns}
			var in []string
			for len(in) == 0 {
				for _, n := range names {
					if rng.IntN(2) == 0 {
						c.Destinations = append(c.Destinations, dedupe.Destination{Name: n})
						in = append(in, n)
					}
				}
			}
			node := rng.IntN(2)
			if rng.IntN(2) == 0 {
				got, err := nodes[node].Accept(ctx, c, ev, time.Hour)
				if err != nil {
					fail("accept %s: %v", id, err)
				}
				log = append(log, fmt.Sprintf("%d node%d accept %s #%d for %v: %v", step, node, id, serial, in, got))
			} else {
				err := nodes[node].DoneAndQueue(ctx, c, ev, time.Hour)
				if err != nil {
					fail("doneandqueue %s: %v", id, err)
				}
				log = append(log, fmt.Sprintf("%d node%d doneandqueue %s #%d for %v", step, node, id, serial, in))
			}
		case r < 50: // lease
			q := queues[rng.IntN(len(queues))]
			node := rng.IntN(2)
			evs, err := nodes[node].Lease(ctx, q, now, 1+rng.IntN(3), leaseFor)
			if err != nil {
				fail("lease: %v", err)
			}
			log = append(log, fmt.Sprintf("%d node%d lease %q: %v", step, node, q, ids(evs)))
			for _, ev := range evs {
				checkBody("leased", ev)
				out[queueKey(q, ev.ID)] = &held{ev: ev, until: now.Add(leaseFor)}
			}
		case r < 72: // a holder reports
			if len(out) == 0 {
				continue
			}
			var key string
			for k := range out {
				key = k
				if rng.IntN(3) == 0 {
					break
				}
			}
			h := out[key]
			delete(out, key)
			ev := *h.ev
			keep := time.Duration(100+rng.IntN(500)) * time.Millisecond
			switch s := rng.IntN(10); {
			case s < 4:
				ev.State = dedupe.Delivered
			case s < 6:
				ev.State, ev.NextAttempt, keep = dedupe.Pending, now, 0
			case s < 9:
				ev.State = dedupe.Dead
			default:
				ev.State = dedupe.Superseded
			}
			ev.Attempts++
			err := nodes[rng.IntN(2)].Update(ctx, &ev, keep)
			log = append(log, fmt.Sprintf("%d update %q %s tok %d -> %s keep %v: %v", step, ev.Namespace, ev.ID, ev.LeaseToken, ev.State, keep, err))
			if err != nil && !errors.Is(err, dedupe.ErrLeaseLost) && !errors.Is(err, dedupe.ErrNotFound) {
				fail("update: %v", err)
			}
		case r < 80: // replay
			q, id := queues[rng.IntN(len(queues))], idPool[rng.IntN(len(idPool))]
			err := nodes[rng.IntN(2)].Replay(ctx, q, id, now)
			log = append(log, fmt.Sprintf("%d replay %q %s: %v", step, q, id, err))
			if err != nil && !errors.Is(err, dedupe.ErrNotDead) && !errors.Is(err, dedupe.ErrNotFound) {
				fail("replay: %v", err)
			}
		case r < 90: // get
			q, id := queues[rng.IntN(len(queues))], idPool[rng.IntN(len(idPool))]
			ev, err := nodes[rng.IntN(2)].Get(ctx, q, id)
			switch {
			case errors.Is(err, dedupe.ErrNotFound):
			case err != nil:
				fail("get: %v", err)
			case ev.State == dedupe.Pending || ev.State == dedupe.Dead:
				checkBody("get", ev)
			}
		default: // time passes: leases lapse (model time), final deliveries expire (real time)
			d := time.Duration(20+rng.IntN(200)) * time.Millisecond
			time.Sleep(d)
			if rng.IntN(3) == 0 {
				now = now.Add(leaseFor + time.Second)
				for k, h := range out {
					if !h.until.After(now) && rng.IntN(2) == 0 {
						delete(out, k) // its holder died
					}
				}
			}
			log = append(log, fmt.Sprintf("%d sleep %v, now +%v", step, d, now.Sub(base)))
		}
		if n := gone.Load(); n > 0 {
			fail("after step %d a Lease dropped a gone event: a Pending delivery lost its body", step)
		}
		if msg := sharedHashInvariants(a, tag, names, idPool); msg != "" {
			fail("after step %d: %s", step, msg)
		}
	}
}

// sharedHashInvariants checks every delivery of ids in the route's queues (names) that shares a
// body: Pending, the shared hash exists for good and names its destination; Dead, it lasts no
// shorter than the delivery.
func sharedHashInvariants(s *Store, tag string, names, ids []string) string {
	pipe := s.client.Pipeline()
	type probe struct {
		name, id string
		cur      *redis.SliceCmd
		ttl      *redis.DurationCmd
	}
	var probes []probe
	pd, pttl := map[string]*redis.StringCmd{}, map[string]*redis.DurationCmd{}
	for _, id := range ids {
		for _, n := range names {
			h := tag + queuePrefix(n) + "e:" + id
			probes = append(probes, probe{n, id, pipe.HMGet(ctx, h, fieldState, fieldShared), pipe.PTTL(ctx, h)})
		}
		pd[id] = pipe.HGet(ctx, tag+"p:"+id, fieldDestinations)
		pttl[id] = pipe.PTTL(ctx, tag+"p:"+id)
	}
	_, _ = pipe.Exec(ctx)
	var problems []string
	for _, p := range probes {
		v := p.cur.Val()
		if len(v) < 2 || v[0] == nil || v[1] == nil {
			continue
		}
		st := v[0].(string)
		d, err := pd[p.id].Result()
		shared := err == nil
		ttl := pttl[p.id].Val()
		switch st {
		case string(dedupe.Pending):
			if !shared || ttl != -1 || !strings.Contains(" "+d+" ", " "+p.name+" ") {
				problems = append(problems, fmt.Sprintf("%s pending in %s shares a body: shared hash %v (names %q, TTL %v)", p.id, p.name, shared, d, ttl))
			}
		case string(dedupe.Dead):
			if !shared || (ttl != -1 && ttl < p.ttl.Val()-5*time.Millisecond) {
				problems = append(problems, fmt.Sprintf("%s dead in %s (TTL %v) shares a body: shared hash %v (TTL %v)", p.id, p.name, p.ttl.Val(), shared, ttl))
			}
		}
	}
	return strings.Join(problems, "; ")
}
