package redisstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// The chunked lease script against a queue mixing entries whose hash is gone, events of
// entities held by a live lease, several events per entity and plain ones, leased with n from 1
// to 5 and each leased event delivered before the next call: every event goes out exactly once,
// the gone ones never.
func TestChunkedLeaseHandsEachEventOutOnce(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 7))
			s := newStore(t)
			tag, _ := s.tag(ns)
			want := map[string]bool{}
			missing := map[string]bool{}
			for i := 0; i < 120; i++ {
				id := fmt.Sprintf("e%03d", i)
				entity := ""
				if rng.IntN(3) > 0 {
					entity = fmt.Sprintf("ent%d", rng.IntN(6))
				}
				acceptAt(t, s, id, entity, int64(i+1), base.Add(time.Duration(rng.IntN(40))*time.Millisecond))
				if rng.IntN(5) == 0 {
					s.client.Del(ctx, tag+"e:"+id)
					missing[id] = true
				} else {
					want[id] = true
				}
			}
			got := map[string]int{}             // deliveries
			liveUntil := map[string]time.Time{} // leases left to lapse
			now := base.Add(time.Second)
			for call := 0; call < 400 && len(got) < len(want); call++ {
				n := 1 + rng.IntN(5)
				evs, err := s.Lease(ctx, ns, now, n, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if len(evs) > n {
					t.Fatalf("call %d: %d events for n=%d", call, len(evs), n)
				}
				for _, ev := range evs {
					if missing[ev.ID] {
						t.Fatalf("call %d handed out %s whose hash is missing", call, ev.ID)
					}
					if got[ev.ID] > 0 {
						t.Fatalf("call %d handed out %s, delivered already", call, ev.ID)
					}
					if until, ok := liveUntil[ev.ID]; ok && now.Before(until) {
						t.Fatalf("call %d handed out %s, whose lease runs to %v, at %v", call, ev.ID, until, now)
					}
				}
				// Deliver all but, now and then, the last: its entity stays held till the lease lapses.
				for i, ev := range evs {
					if i == len(evs)-1 && rng.IntN(4) == 0 {
						liveUntil[ev.ID] = now.Add(time.Minute)
						continue
					}
					got[ev.ID]++
					ev.State = dedupe.Delivered
					if err := s.Update(ctx, ev, time.Hour); err != nil {
						t.Fatalf("Update %s: %v", ev.ID, err)
					}
				}
				now = now.Add(20 * time.Second) // a held lease lapses after three calls
			}
			for id := range want {
				if got[id] != 1 {
					t.Errorf("%s handed out %d times", id, got[id])
				}
			}
		})
	}
}

// A call whose first read of the due queue hands out a few events and meets a long run of a held
// entity's events reads on past them, and hands out each event behind them once, not again the
// ones it already handed out (which stay in the queue until the call moves them all).
func TestLeaseReadingPastAHeldEntityHandsOutEachEventOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	acceptAt(t, s, "x0", "cus_x", 1, base)
	if evs := lease(t, s, base, 1); len(evs) != 1 || evs[0].ID != "x0" {
		t.Fatalf("leased %v, want x0 to hold cus_x", ids(evs))
	}
	at := base.Add(time.Millisecond)
	acceptAt(t, s, "p1", "", 0, at)
	acceptAt(t, s, "p2", "", 0, at.Add(time.Millisecond))
	for i := 1; i <= 10; i++ {
		acceptAt(t, s, fmt.Sprintf("x%02d", i), "cus_x", int64(i+1), at.Add(time.Duration(1+i)*time.Millisecond))
	}
	acceptAt(t, s, "p3", "", 0, at.Add(20*time.Millisecond))
	evs := lease(t, s, base.Add(time.Second), 4)
	if got := ids(evs); !slices.Equal(got, []string{"p1", "p2", "p3"}) {
		t.Fatalf("leased %v, want p1, p2 and p3 once each", got)
	}
}

// A call that meets a long run of a held entity's events reads of each only what tells it the
// event waits (its state and entity), not the whole event with its body: behind a run of large
// bodies, reading them all would stall Redis, and every client with it, for the run's length.
func TestLeasePastAHeldEntityReadsNoBodyOfItsWaitingEvents(t *testing.T) {
	t.Parallel()
	srv := redistest.Run(t)
	s := storeAt(t, srv.Addr, newPrefix())
	acceptAt(t, s, "x0", "cus_x", 1, base)
	if evs := lease(t, s, base, 1); len(evs) != 1 || evs[0].ID != "x0" {
		t.Fatalf("leased %v, want x0 to hold cus_x", ids(evs))
	}
	for i := 1; i <= 20; i++ {
		acceptAt(t, s, fmt.Sprintf("x%02d", i), "cus_x", int64(i+1), base.Add(time.Duration(i)*time.Millisecond))
	}
	acceptAt(t, s, "p1", "", 0, base.Add(time.Second))
	reads := func() int {
		stats := s.client.Info(ctx, "commandstats").Val()
		_, rest, _ := strings.Cut(stats, "cmdstat_hgetall:calls=")
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest+",", ',')])
		return n
	}
	before := reads()
	if got := ids(lease(t, s, base.Add(2*time.Second), 1)); !slices.Equal(got, []string{"p1"}) {
		t.Fatalf("leased %v, want p1", got)
	}
	if n := reads() - before; n > 1 {
		t.Fatalf("a Lease handing out one event past 20 waiting ones read %d whole events, want 1", n)
	}
}
