package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// Three destinations' workers lease and settle concurrently (retry, delivered, dead,
// superseded, replays of dead letters) while events are accepted; once all is delivered, no
// payload keeps a body or lasts for good, and none was handed out without its body.
func TestThreeDestinationsSettledConcurrentlyKeepTheirBodies(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	const events = 2000
	bodies := sync.Map{}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range events {
			id := fmt.Sprintf("c%05d", i)
			c := event(id)
			for _, name := range modelDests {
				if rng.IntN(3) > 0 {
					c.Destinations = append(c.Destinations, dedupe.Destination{Name: name})
				}
			}
			ev := queued(id, time.Now())
			ev.Body = bytes.Repeat([]byte(id), 1+rng.IntN(100))
			bodies.Store(id, ev.Body)
			if out, err := b.Accept(ctx, c, ev, time.Hour); err != nil || out != dedupe.Claimed {
				t.Errorf("Accept(%s): %v %v", id, out, err)
				return
			}
			accepted.Add(1)
		}
	})
	var failed atomic.Bool
	for w, name := range modelDests {
		for k := range 2 {
			q := dedupe.QueueNamespace("stripe", name)
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(k)))
				idle := 0
				for idle < 200 && !failed.Load() {
					evs, err := b.Lease(ctx, q, time.Now(), 1+rng.IntN(5), time.Minute)
					if err != nil {
						t.Error(err)
						failed.Store(true)
						return
					}
					if len(evs) == 0 {
						if accepted.Load() == events {
							idle++
						}
						time.Sleep(time.Millisecond)
						continue
					}
					idle = 0
					for _, ev := range evs {
						want, _ := bodies.Load(ev.ID)
						if !bytes.Equal(ev.Body, want.([]byte)) {
							t.Errorf("%q leased %s with %d bytes of body, want %d", q, ev.ID, len(ev.Body), len(want.([]byte)))
							failed.Store(true)
						}
						keep := time.Hour
						switch r := rng.IntN(10); {
						case r < 2:
							ev.State, ev.NextAttempt = dedupe.Pending, time.Now()
						case r < 4:
							ev.State = dedupe.Dead
						case r < 5:
							ev.State = dedupe.Superseded
						default:
							ev.State = dedupe.Delivered
						}
						if err := b.Update(ctx, ev, keep); err != nil {
							t.Errorf("Update(%q, %s): %v", q, ev.ID, err)
							failed.Store(true)
							return
						}
						if ev.State == dedupe.Dead && rng.IntN(2) == 0 {
							if err := b.Replay(ctx, q, ev.ID, time.Now()); err != nil {
								t.Errorf("Replay(%q, %s): %v", q, ev.ID, err)
							}
						}
					}
				}
			})
		}
	}
	wg.Wait()
	// Every dead letter: its body is there. Then replay all and deliver them, one queue at a time.
	for _, name := range modelDests {
		q := dedupe.QueueNamespace("stripe", name)
		if n := b.Pending(q); n != 0 {
			t.Errorf("Pending(%q) = %d after the workers", q, n)
		}
		dead, err := b.List(ctx, q, dedupe.Dead, dedupe.Cursor{}, events)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range dead {
			got, err := b.Get(ctx, q, d.ID)
			want, _ := bodies.Load(d.ID)
			if err != nil || !bytes.Equal(got.Body, want.([]byte)) {
				t.Fatalf("dead letter %s in %q: %v, body %d bytes, want %d", d.ID, q, err, len(got.Body), len(want.([]byte)))
			}
			if err := b.Replay(ctx, q, d.ID, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		for {
			evs, err := b.Lease(ctx, q, time.Now(), 500, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				break
			}
			for _, ev := range evs {
				ev.State = dedupe.Delivered
				update(t, b, ev, time.Hour)
			}
		}
	}
	err := b.db.View(func(txn *badger.Txn) error {
		for i := range events {
			ok, _ := keysFor("stripe", fmt.Sprintf("c%05d", i))
			item, err := txn.Get(ok.payload)
			if errors.Is(err, badger.ErrKeyNotFound) {
				return fmt.Errorf("c%05d: no payload", i)
			}
			if err != nil {
				return err
			}
			p, err := getPayload(txn, ok.payload)
			if err != nil {
				return err
			}
			if item.ExpiresAt() == 0 || len(p.body) > 0 {
				return fmt.Errorf("c%05d: payload expires at %d with %d bytes of body, once delivered everywhere", i, item.ExpiresAt(), len(p.body))
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
