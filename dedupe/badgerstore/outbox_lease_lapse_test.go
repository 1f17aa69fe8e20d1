package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Workers whose leases often lapse while they work, and who retry or deliver at random, are
// never handed an event while another holder's lease on it runs and has not been reported, and
// every event is delivered in the end.
func TestLapsingLeasesNeverOverlapAndLoseNothing(t *testing.T) {
	b := openTest(t)
	var ticks atomic.Int64
	now := func() time.Time { return base.Add(time.Duration(ticks.Load()) * time.Millisecond) }
	b.clock = now
	const events, workers, leaseFor = 300, 8, 5 * time.Millisecond
	for i := range events {
		enqueue(t, b, queued(fmt.Sprintf("e-%03d", i), base))
	}
	type holder struct {
		token       uint64
		from, until time.Time
		reported    bool
	}
	var mu sync.Mutex
	active := map[string]*holder{}
	var delivered atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for idle := 0; delivered.Load() < events && idle < 20000; {
				at := now()
				evs, err := b.Lease(context.Background(), "stripe", at, 3, leaseFor)
				if err != nil {
					t.Error(err)
					return
				}
				if len(evs) == 0 {
					idle++
					ticks.Add(1)
					continue
				}
				for _, ev := range evs {
					h := &holder{token: ev.LeaseToken, from: at, until: ev.NextAttempt}
					mu.Lock()
					// Tokens count up as leases are handed out, but a worker may note its lease
					// after a later holder noted theirs: its own lease had not been reported then.
					switch prev := active[ev.ID]; {
					case prev == nil:
						active[ev.ID] = h
					case prev.token < h.token:
						if !prev.reported && at.Before(prev.until) {
							t.Errorf("%s handed out at %v to token %d while token %d held it until %v", ev.ID, at, h.token, prev.token, prev.until)
						}
						active[ev.ID] = h
					case prev.from.Before(h.until):
						t.Errorf("%s handed out at %v to token %d while token %d held it until %v", ev.ID, prev.from, prev.token, h.token, h.until)
					}
					mu.Unlock()
					ticks.Add(rand.Int64N(8)) // the lease lapses now and then
					mu.Lock()
					h.reported = true
					mu.Unlock()
					if rand.IntN(2) == 0 {
						ev.State, ev.NextAttempt = dedupe.Pending, now()
					} else {
						ev.State = dedupe.Delivered
					}
					switch err := b.Update(context.Background(), ev, time.Hour); {
					case errors.Is(err, dedupe.ErrLeaseLost):
					case err != nil:
						t.Errorf("Update(%s, %s): %v", ev.ID, ev.State, err)
					case ev.State == dedupe.Delivered:
						delivered.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := delivered.Load(); n != events {
		t.Errorf("%d of %d events delivered", n, events)
	}
}
