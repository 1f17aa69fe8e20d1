package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// TestReusedIDsOverThreeDestinationsKeepTheirBodies runs random Accepts and
// DoneAndQueues of a few reused IDs (dedupe off: a provider's resend past the dedupe window) for
// random sets of three destinations, leases, settles, replays and the clock moving on so final
// deliveries expire. After every step, for every ID in every queue: a Pending or Dead delivery
// has a body that one of the ID's events was queued with, a DoneAndQueue leaves a live delivery
// in each of its destinations, an Accept answered Claimed a Pending one; every dead letter found
// replays; every Lease hands out the body. At the end every queue drains.
func TestReusedIDsOverThreeDestinationsKeepTheirBodies(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { reuseModel(t, seed, 1500) })
	}
}

func reuseModel(t *testing.T, seed uint64, steps int) {
	b, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := base
	b.clock = func() time.Time { return now }
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 34))
	ids := []string{"x0", "x1", "x2", "x3"}
	bodies := map[string][][]byte{}
	var held []*dedupe.Event
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format+"\nlast steps:\n%s", append([]any{seed}, append(args, strings.Join(log[max(0, len(log)-30):], "\n"))...)...)
	}
	q := func(name string) string { return dedupe.QueueNamespace("stripe", name) }
	known := func(id string, body []byte) bool {
		for _, b := range bodies[id] {
			if bytes.Equal(b, body) {
				return true
			}
		}
		return false
	}
	serial := 0
	settle := func(i int) {
		ev := held[i]
		held = append(held[:i], held[i+1:]...)
		var keep time.Duration
		switch r := rng.IntN(10); {
		case r < 3:
			ev.State, ev.NextAttempt = dedupe.Pending, now.Add(time.Duration(rng.IntN(3))*time.Hour)
		case r < 6:
			ev.State, keep = dedupe.Delivered, time.Duration(1+rng.IntN(24))*time.Hour
		case r < 9:
			ev.State, keep = dedupe.Dead, time.Duration(1+rng.IntN(72))*time.Hour
		default:
			ev.State, keep = dedupe.Superseded, time.Duration(1+rng.IntN(24))*time.Hour
		}
		ev.Attempts++
		err := b.Update(ctx, ev, keep)
		log = append(log, fmt.Sprintf("update %q %s -> %s keep %v: %v", ev.Namespace, ev.ID, ev.State, keep, err))
		if err != nil {
			fail("update: %v", err)
		}
	}
	for step := range steps {
		switch r := rng.IntN(20); {
		case r < 5:
			id := ids[rng.IntN(len(ids))]
			serial++
			ev := queued(id, now)
			ev.Body = []byte(fmt.Sprintf(`{"id":%q,"serial":%d}`, id, serial))
			bodies[id] = append(bodies[id], ev.Body)
			c := dedupe.Claim{Namespace: "stripe"}
			var in []string
			for len(in) == 0 {
				for _, n := range modelDests {
					if rng.IntN(2) == 0 {
						c.Destinations = append(c.Destinations, dedupe.Destination{Name: n})
						in = append(in, n)
					}
				}
			}
			if rng.IntN(2) == 0 {
				out, err := b.Accept(ctx, c, ev, time.Hour)
				log = append(log, fmt.Sprintf("%d accept %s #%d for %v: %v %v", step, id, serial, in, out, err))
				if err != nil {
					fail("accept: %v", err)
				}
				if out == dedupe.Claimed {
					for _, n := range in {
						if got, err := b.Get(ctx, q(n), id); err != nil || got.State != dedupe.Pending || !bytes.Equal(got.Body, ev.Body) {
							fail("after the accept, %s in %s: %v, %v", id, n, got, err)
						}
					}
				}
			} else {
				err := b.DoneAndQueue(ctx, c, ev, time.Hour)
				log = append(log, fmt.Sprintf("%d doneandqueue %s #%d for %v: %v", step, id, serial, in, err))
				if err != nil {
					fail("doneandqueue: %v", err)
				}
				for _, n := range in {
					if _, err := b.Get(ctx, q(n), id); err != nil {
						fail("after the doneandqueue, %s in %s: %v", id, n, err)
					}
				}
			}
		case r < 9:
			name := modelDests[rng.IntN(3)]
			evs, err := b.Lease(ctx, q(name), now, 1+rng.IntN(4), 1000*time.Hour)
			if err != nil {
				fail("lease: %v", err)
			}
			log = append(log, fmt.Sprintf("%d lease %s: %d", step, name, len(evs)))
			for _, ev := range evs {
				if !known(ev.ID, ev.Body) {
					fail("%s leased from %s with body %q, which none of its events had", ev.ID, name, ev.Body)
				}
				held = append(held, ev)
			}
		case r < 15 && len(held) > 0:
			settle(rng.IntN(len(held)))
		case r < 17:
			name, id := modelDests[rng.IntN(3)], ids[rng.IntN(len(ids))]
			got, err := b.Get(ctx, q(name), id)
			if err == nil && got.State == dedupe.Dead {
				err := b.Replay(ctx, q(name), id, now)
				log = append(log, fmt.Sprintf("%d replay %s %s: %v", step, name, id, err))
				if err != nil {
					fail("replay of a dead letter: %v", err)
				}
			}
		default:
			for len(held) > 0 {
				settle(0)
			}
			now = now.Add(time.Duration(rng.IntN(6*3600)) * time.Second)
			log = append(log, fmt.Sprintf("%d now +%v", step, now.Sub(base)))
		}
		for _, id := range ids {
			for _, n := range modelDests {
				got, err := b.Get(ctx, q(n), id)
				switch {
				case errors.Is(err, dedupe.ErrNotFound):
				case err != nil:
					fail("get %s in %s: %v", id, n, err)
				case got.State == dedupe.Pending || got.State == dedupe.Dead:
					if len(got.Body) == 0 || !known(id, got.Body) {
						fail("after step %d, %s %s in %s has body %q", step, id, got.State, n, got.Body)
					}
				}
			}
		}
	}
	for round := 0; ; round++ {
		for len(held) > 0 {
			settle(0)
		}
		now = now.Add(3 * time.Hour)
		for _, n := range modelDests {
			evs, err := b.Lease(ctx, q(n), now, 1000, 1000*time.Hour)
			if err != nil {
				fail("drain: %v", err)
			}
			held = append(held, evs...)
		}
		if len(held) == 0 {
			break
		}
		if round > 1000 {
			fail("did not drain")
		}
	}
	for _, n := range modelDests {
		if p := b.Pending(q(n)); p != 0 {
			fail("Pending(%s) = %d after the drain", n, p)
		}
	}
}
