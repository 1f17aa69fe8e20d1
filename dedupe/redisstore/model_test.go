package redisstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// handout is one event as a Lease call handed it out.
type handout struct {
	ev    *dedupe.Event
	call  int
	until time.Time
}

// TestRandomOpsFromTwoNodesKeepQueueInvariants runs random accepts, leases (random n, from two nodes), updates (in
// time, after the lapse, or never), replays and lapses, and after every step checks the queue's
// invariants in Redis and the lease's promises; at the end it drains the queue.
func TestRandomOpsFromTwoNodesKeepQueueInvariants(t *testing.T) {
	t.Parallel()
	seeds := uint64(3) // MODEL_SEEDS runs more
	if n, err := strconv.Atoi(os.Getenv("MODEL_SEEDS")); err == nil && n > 0 {
		seeds = uint64(n)
	}
	// A server of its own: queueInvariants lists keys with KEYS, which scans the whole keyspace,
	// and the package's other tests fill the shared server with tens of thousands.
	srv := redistest.Run(t, redistest.Durable...)
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			randomRun(t, srv.Addr, seed, 400, nil)
		})
	}
}

// The same with events queued for random sets of a route's three destinations: each queue keeps
// its invariants and its leases' promises on its own, and an event's shared header and body are
// kept exactly while one of its deliveries is Pending (for good) or Dead (with a TTL).
func TestRandomOpsOnThreeDestinationsKeepEachQueuesInvariants(t *testing.T) {
	t.Parallel()
	seeds := uint64(3) // MODEL_SEEDS runs more
	if n, err := strconv.Atoi(os.Getenv("MODEL_SEEDS")); err == nil && n > 0 {
		seeds = uint64(n)
	}
	srv := redistest.Run(t, redistest.Durable...)
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			randomRun(t, srv.Addr, seed, 600, []string{dedupe.DefaultDestination, "billing", "analytics"})
		})
	}
}

// randomRun runs the model for steps. With destinations, each event is queued for a random
// non-empty set of them (nil: the route's default destination, without Claim.Destinations), and
// each lease, update and replay is of one of their queues.
func randomRun(t *testing.T, addr string, seed uint64, steps int, destinations []string) {
	rng := rand.New(rand.NewPCG(seed, 7))
	prefix := newPrefix()
	a, b := storeAt(t, addr, prefix), storeAt(t, addr, prefix)
	nodes := []*Store{a, b}
	tag, _ := a.tag(ns)
	queues := []string{ns}
	if destinations != nil {
		queues = nil
		for _, d := range destinations {
			queues = append(queues, dedupe.QueueNamespace(ns, d))
		}
	}
	now := base
	const leaseFor = 10 * time.Second
	entities := []string{"", "e1", "e2", "e3"}
	versions := map[string]int64{}
	// Keyed by queue and ID (queued):
	out := map[string]*handout{} // handed out, not yet updated by its holder
	tokens := map[string]uint64{}
	accepted, calls := 0, 0
	var dead []string
	shared := map[string][]string{} // the events of several destinations, with their queues
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		tail := log[max(0, len(log)-25):]
		t.Fatalf("seed %d: "+format+"\nlast steps:\n%s", append([]any{seed}, append(args, strings.Join(tail, "\n"))...)...)
	}
	for step := range steps {
		switch r := rng.IntN(100); {
		case r < 30: // accept
			ent := entities[rng.IntN(len(entities))]
			id := "ev" + strconv.Itoa(accepted)
			accepted++
			c := claim(id)
			if ent != "" {
				versions[ent]++
				c.Entity, c.Version = ent, versions[ent]
			}
			var in []string // its queues, when destinations are set
			for len(destinations) > 0 && len(in) == 0 {
				for i, d := range destinations {
					if rng.IntN(2) == 0 {
						c.Destinations = append(c.Destinations, dedupe.Destination{Name: d})
						in = append(in, queues[i])
					}
				}
			}
			if len(in) > 1 {
				shared[id] = in
			}
			ev := queued(id, now)
			ev.Entity, ev.Version = c.Entity, c.Version
			got, err := nodes[rng.IntN(2)].Accept(ctx, c, ev, time.Hour)
			if err != nil || got != dedupe.Claimed {
				fail("accept %s: %v %v", id, got, err)
			}
			log = append(log, fmt.Sprintf("%d accept %s %s@%d for %q", step, id, ent, c.Version, in))
		case r < 60: // lease
			n := 1 + rng.IntN(3)
			node := rng.IntN(2)
			q := queues[rng.IntN(len(queues))]
			calls++
			evs, err := nodes[node].Lease(ctx, q, now, n, leaseFor)
			if err != nil {
				fail("lease: %v", err)
			}
			log = append(log, fmt.Sprintf("%d node%d lease %q n=%d at +%v: %v", step, node, q, n, now.Sub(base), ids(evs)))
			for _, ev := range evs {
				key := queueKey(q, ev.ID)
				if ev.Namespace != q {
					fail("%s leased from %q carries namespace %q", ev.ID, q, ev.Namespace)
				}
				if h := out[key]; h != nil && h.until.After(now) {
					fail("%s handed out again at +%v within its lease (call %d until +%v)", ev.ID, now.Sub(base), h.call, h.until.Sub(base))
				}
				if ev.Entity != "" {
					for _, h := range out {
						if h.ev.Namespace == q && h.ev.Entity == ev.Entity && h.call != calls && h.until.After(now) {
							fail("%s of %s handed out at +%v while %s of it is out on call %d until +%v",
								ev.ID, ev.Entity, now.Sub(base), h.ev.ID, h.call, h.until.Sub(base))
						}
					}
				}
				if ev.LeaseToken != tokens[key]+1 {
					fail("%s token %d, want %d", ev.ID, ev.LeaseToken, tokens[key]+1)
				}
				if len(ev.Body) == 0 || ev.Header == nil {
					fail("%s leased from %q without its body or header", ev.ID, q)
				}
				tokens[key] = ev.LeaseToken
				out[key] = &handout{ev: ev, call: calls, until: now.Add(leaseFor)}
			}
		case r < 85: // a holder reports (maybe after its lease lapsed)
			if len(out) == 0 {
				continue
			}
			var h *handout
			for _, x := range out { // any of them
				h = x
				if rng.IntN(3) == 0 {
					break
				}
			}
			ev := *h.ev
			keep := time.Hour
			switch s := rng.IntN(10); {
			case s < 5:
				ev.State = dedupe.Delivered
			case s < 7:
				ev.State, ev.NextAttempt, keep = dedupe.Pending, now.Add(time.Duration(rng.IntN(20))*time.Second), 0
			case s < 9:
				ev.State = dedupe.Dead
			default:
				ev.State = dedupe.Superseded
			}
			ev.Attempts++
			err := nodes[rng.IntN(2)].Update(ctx, &ev, keep)
			key := queueKey(ev.Namespace, ev.ID)
			lost := ev.LeaseToken != tokens[key]
			switch {
			case lost && !errors.Is(err, dedupe.ErrLeaseLost):
				fail("update of %s with a superseded token %d (latest %d): %v", ev.ID, ev.LeaseToken, tokens[key], err)
			case !lost && err != nil:
				fail("update of %s by its latest holder: %v", ev.ID, err)
			}
			log = append(log, fmt.Sprintf("%d update %q %s tok %d -> %s (err %v)", step, ev.Namespace, ev.ID, ev.LeaseToken, ev.State, err))
			if out[key] == h {
				delete(out, key)
			}
			if err == nil && ev.State == dedupe.Dead {
				dead = append(dead, key)
			}
		case r < 88: // replay a dead letter
			if len(dead) == 0 {
				continue
			}
			i := rng.IntN(len(dead))
			q, id, _ := strings.Cut(dead[i], "\x00\x00")
			dead = append(dead[:i], dead[i+1:]...)
			err := nodes[rng.IntN(2)].Replay(ctx, q, id, now)
			log = append(log, fmt.Sprintf("%d replay %q %s: %v", step, q, id, err))
			if err != nil && !errors.Is(err, dedupe.ErrNotDead) {
				fail("replay %s: %v", id, err)
			}
		case r < 94: // a holder dies: it never reports
			for id, h := range out {
				log = append(log, fmt.Sprintf("%d holder of %s (call %d) dies", step, id, h.call))
				delete(out, id)
				break
			}
		default: // time passes
			now = now.Add(time.Duration(1+rng.IntN(8)) * time.Second)
			log = append(log, fmt.Sprintf("%d now +%v", step, now.Sub(base)))
		}
		for _, q := range queues {
			_, qt, _ := a.queue(q)
			if msg := queueInvariants(a, qt, now); msg != "" {
				fail("after step %d, in %q: %s", step, q, msg)
			}
		}
		if msg := sharedBodyInvariants(a, tag, shared); msg != "" {
			fail("after step %d: %s", step, msg)
		}
	}
	// Drain: time passes well beyond every lease and retry; every event must end final.
	for _, q := range queues {
		for round := range 200 {
			now = now.Add(time.Minute)
			evs, err := a.Lease(ctx, q, now, 1000, leaseFor)
			if err != nil {
				fail("drain lease: %v", err)
			}
			for _, ev := range evs {
				ev.State = dedupe.Delivered
				if err := a.Update(ctx, ev, time.Hour); err != nil {
					fail("drain update %s: %v", ev.ID, err)
				}
			}
			pending, _ := a.Pending(ctx, q)
			if pending == 0 {
				break
			}
			if round == 199 {
				_, qt, _ := a.queue(q)
				fail("after 200 drain rounds %d events are still pending in %q: %s", pending, q, queueInvariants(a, qt, now))
			}
		}
	}
	if msg := sharedBodyInvariants(a, tag, shared); msg != "" {
		fail("drained: %s", msg)
	}
}

// queueKey is the model's key of event id in queue q.
func queueKey(q, id string) string { return q + "\x00\x00" + id }

// sharedBodyInvariants checks, in Redis, that each event of several destinations (shared: its
// ID and queues) keeps its shared hash for good while one of its deliveries is Pending, with a TTL
// while one is Dead and none is Pending, and not at all once none is either.
func sharedBodyInvariants(s *Store, tag string, shared map[string][]string) string {
	pipe := s.client.Pipeline()
	states := map[string][]*redis.StringCmd{}
	ttls := map[string]*redis.DurationCmd{}
	for id, queues := range shared {
		for _, q := range queues {
			_, qt, _ := s.queue(q)
			states[id] = append(states[id], pipe.HGet(ctx, qt+"e:"+id, fieldState))
		}
		ttls[id] = pipe.PTTL(ctx, tag+"p:"+id)
	}
	_, _ = pipe.Exec(ctx) // a missing field fails its command alone, read below
	var problems []string
	for id := range shared {
		live, dead := false, false
		for _, st := range states[id] {
			switch dedupe.State(st.Val()) {
			case dedupe.Pending:
				live = true
			case dedupe.Dead:
				dead = true
			}
		}
		ttl, err := ttls[id].Result()
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", id, err))
		case live && ttl != -1:
			problems = append(problems, fmt.Sprintf("%s is pending somewhere, its shared body's TTL is %v", id, ttl))
		case !live && dead && ttl <= 0:
			problems = append(problems, fmt.Sprintf("%s is dead somewhere and pending nowhere, its shared body's TTL is %v", id, ttl))
		case !live && !dead && ttl != -2:
			problems = append(problems, fmt.Sprintf("%s is delivered or superseded everywhere, its shared body is kept (TTL %v)", id, ttl))
		}
	}
	return strings.Join(problems, "; ")
}

// queueInvariants checks, in Redis: every Pending event is in the due queue or its entity's
// waiting set, exactly one; both hold only Pending events; the pending listing counts exactly the
// Pending events; an entity with waiting events is held, or has an event in the queue (else they
// would wait for good). It returns what is wrong, or "". It reads in two pipelines, not a round
// trip per key: it runs after every step of the model.
func queueInvariants(s *Store, tag string, now time.Time) string {
	var problems []string
	first := s.client.Pipeline()
	qCmd := first.ZRange(ctx, tag+"q", 0, -1)
	waitKeysCmd := first.Keys(ctx, tagGlob(tag)+"b:*")
	evKeysCmd := first.Keys(ctx, tagGlob(tag)+"e:*")
	listedCmd := first.ZCard(ctx, tag+"s:pending")
	_, _ = first.Exec(ctx)
	q, keys, evKeys := qCmd.Val(), waitKeysCmd.Val(), evKeysCmd.Val()

	second := s.client.Pipeline()
	membersCmds := make([]*redis.StringSliceCmd, len(keys))
	heldCmds := make([]*redis.FloatCmd, len(keys))
	for i, k := range keys {
		membersCmds[i] = second.ZRange(ctx, k, 0, -1)
		heldCmds[i] = second.ZScore(ctx, tag+"L", strings.TrimPrefix(k, tag+"b:"))
	}
	queuedEntityCmds := make([]*redis.StringCmd, len(q))
	for i, id := range q {
		queuedEntityCmds[i] = second.HGet(ctx, tag+"e:"+id, fieldEntity)
	}
	stateCmds := make([]*redis.StringCmd, len(evKeys))
	for i, k := range evKeys {
		stateCmds[i] = second.HGet(ctx, k, fieldState)
	}
	_, _ = second.Exec(ctx) // a missing field or member fails its command alone, read below

	inQ := map[string]bool{}
	queuedEntities := map[string]bool{}
	for i, id := range q {
		inQ[id] = true
		queuedEntities[queuedEntityCmds[i].Val()] = true
	}
	parked := map[string]string{}
	for i, k := range keys {
		ent := strings.TrimPrefix(k, tag+"b:")
		members := membersCmds[i].Val()
		for _, id := range members {
			if inQ[id] {
				problems = append(problems, id+" both queued and waiting")
			}
			parked[id] = ent
		}
		held, err := heldCmds[i].Result()
		heldLive := err == nil && held > float64(now.UnixMicro())
		if !heldLive && !queuedEntities[ent] && err != nil {
			problems = append(problems, fmt.Sprintf("entity %s has %d waiting events, no hold and nothing queued: they wait for good", ent, len(members)))
		}
	}
	pending := 0
	for i, k := range evKeys {
		id := strings.TrimPrefix(k, tag+"e:")
		st := stateCmds[i].Val()
		_, isParked := parked[id]
		if st == string(dedupe.Pending) {
			pending++
			if !inQ[id] && !isParked {
				problems = append(problems, id+" is pending but neither queued nor waiting: never delivered")
			}
		} else if inQ[id] || isParked {
			problems = append(problems, id+" is "+st+" but still queued or waiting")
		}
	}
	if listed := listedCmd.Val(); int(listed) != pending {
		problems = append(problems, fmt.Sprintf("pending listing counts %d, %d events are pending", listed, pending))
	}
	return strings.Join(problems, "; ")
}

// tagGlob is tag with KEYS's special characters escaped.
func tagGlob(tag string) string { return globEscape(tag) }
