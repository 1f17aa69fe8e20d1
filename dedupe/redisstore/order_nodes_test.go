package redisstore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Two nodes leasing and settling one ordered queue concurrently: one event of a key out at a
// time, each key's events delivered in the order they were accepted, none lost.
func TestTwoNodesDeliverEachKeyInOrderOneAtATime(t *testing.T) {
	a, b := twoNodes(t)
	const keys, per = 20, 10
	queue := dedupe.QueueNamespace(ns, "billing")
	for j := 0; j < per; j++ {
		for k := 0; k < keys; k++ {
			id := fmt.Sprintf("k%d-%d", k, j)
			if out, err := pickNode(j+k, a, b).Accept(ctx, orderedIn(id, fmt.Sprintf("k%d", k), false), queued(id, base), time.Hour); err != nil || out != dedupe.Claimed {
				t.Fatalf("accept %s: %v %v", id, out, err)
			}
		}
	}
	var mu sync.Mutex
	out := map[string]string{} // key → the event out
	next := map[string]int{}   // key → the index expected next
	var delivered, attempts atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(60 * time.Second)
	for w := 0; w < 4; w++ {
		s := pickNode(w, a, b)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for delivered.Load() < keys*per && time.Now().Before(deadline) {
				evs, err := s.Lease(ctx, queue, base, 3, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				for _, ev := range evs {
					var k, j int
					fmt.Sscanf(ev.ID, "k%d-%d", &k, &j)
					mu.Lock()
					if o := out[ev.OrderKey]; o != "" {
						t.Errorf("%s leased while %s of its key is out", ev.ID, o)
					}
					if next[ev.OrderKey] != j {
						t.Errorf("%s leased, want index %d of its key next", ev.ID, next[ev.OrderKey])
					}
					out[ev.OrderKey] = ev.ID
					retry := attempts.Add(1)%3 == 0 && ev.Attempts == 0
					if !retry {
						next[ev.OrderKey] = j + 1
					}
					mu.Unlock()
					time.Sleep(time.Duration(j%3) * 200 * time.Microsecond) // delivering
					mu.Lock()
					out[ev.OrderKey] = ""
					mu.Unlock()
					if retry {
						ev.State, ev.Attempts, ev.NextAttempt = dedupe.Pending, 1, base
					} else {
						ev.State = dedupe.Delivered
					}
					if err := s.Update(ctx, ev, time.Hour); err != nil {
						t.Errorf("update %s: %v", ev.ID, err)
						return
					}
					if !retry {
						delivered.Add(1)
					}
				}
				if len(evs) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}(w)
	}
	wg.Wait()
	if got := delivered.Load(); got != keys*per {
		t.Fatalf("delivered %d of %d; next per key %v", got, keys*per, next)
	}
}

func pickNode(i int, a, b *Store) *Store {
	if i%2 == 0 {
		return a
	}
	return b
}
