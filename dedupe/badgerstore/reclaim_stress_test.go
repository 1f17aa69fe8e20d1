package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Reclaim runs while the disk is low, which is while the deliverer is still draining and
// providers may still be sending: it must neither fail a concurrent request nor lose an
// acknowledged event. Accepts, Leases and Updates (delivered, retried, dead) run for a few
// seconds against back-to-back Reclaims; every accepted event must then be there, in the state
// its last acknowledged Update set, before and after a reopen.
func TestReclaimUnderLoadLosesNothing(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	body := bytes.Repeat([]byte("y"), 4<<10)

	var (
		mu       sync.Mutex
		accepted = map[string]dedupe.State{} // ID -> state last acknowledged
		failures []string
		reclaims atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, fmt.Sprintf(format, a...))
		}
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stopped(); i++ {
				ev := queued(fmt.Sprintf("w%d-%06d", w, i), time.Now())
				ev.Body = body
				out, err := b.Accept(ctx, dedupe.Claim{Namespace: ev.Namespace, ID: ev.ID}, ev, time.Hour)
				if err != nil {
					fail("Accept %s: %v", ev.ID, err)
					return
				}
				if out == dedupe.Claimed {
					mu.Lock()
					accepted[ev.ID] = dedupe.Pending
					mu.Unlock()
				}
			}
		})
	}
	for w := range 2 {
		wg.Go(func() {
			for n := 0; !stopped(); n++ {
				evs, err := b.Lease(ctx, "stripe", time.Now(), 32, time.Minute)
				if err != nil {
					fail("Lease: %v", err)
					return
				}
				for i, ev := range evs {
					switch (n + i + w) % 3 {
					case 0:
						ev.State = dedupe.Delivered
					case 1:
						ev.State, ev.NextAttempt, ev.Attempts, ev.LastError = dedupe.Pending, time.Now(), ev.Attempts+1, "retry"
					default:
						ev.State = dedupe.Dead
					}
					if err := b.Update(ctx, ev, time.Hour); err != nil {
						fail("Update %s to %s: %v", ev.ID, ev.State, err)
						return
					}
					mu.Lock()
					accepted[ev.ID] = ev.State
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() {
		for !stopped() {
			if err := b.Reclaim(ctx); err != nil {
				fail("Reclaim: %v", err)
				return
			}
			reclaims.Add(1)
		}
	})
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d events accepted, %d reclaims", len(accepted), reclaims.Load())
	if err := b.Err(); err != nil {
		failures = append(failures, fmt.Sprintf("store failed: %v", err))
	}
	if len(failures) > 0 {
		t.Fatalf("under Reclaim:\n%s", joinLines(failures))
	}
	check := func(when string, b *Store) {
		t.Helper()
		var lost []string
		for id, want := range accepted {
			got, err := b.Get(ctx, "stripe", id)
			switch {
			case errors.Is(err, dedupe.ErrNotFound):
				lost = append(lost, id+": not found")
			case err != nil:
				t.Fatalf("%s: Get %s: %v", when, id, err)
			case got.State != want:
				lost = append(lost, fmt.Sprintf("%s: %s, want %s", id, got.State, want))
			case (want == dedupe.Pending || want == dedupe.Dead) && !bytes.Equal(got.Body, body):
				lost = append(lost, fmt.Sprintf("%s: %s with a %d-byte body", id, want, len(got.Body)))
			}
		}
		if len(lost) > 0 {
			t.Fatalf("%s: %d of %d acknowledged events lost or changed, e.g. %q", when, len(lost), len(accepted), lost[:min(5, len(lost))])
		}
	}
	check("after the load", b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	check("after a reopen", b)
}

func joinLines(s []string) string {
	var buf bytes.Buffer
	for _, l := range s {
		buf.WriteString(l + "\n")
	}
	return buf.String()
}
