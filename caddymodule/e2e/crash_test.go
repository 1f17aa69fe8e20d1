//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/internal/hooktest"
)

// TestAsyncCrashLosesNothingAcknowledged is the promise to operators, shown with the built
// binary and examples/async.Caddyfile: under a load of signed events Caddy is killed with -9 and
// started again; every event that got a 2xx reaches the upstream, and the only duplicates are
// the few that were in flight at the kill.
func TestAsyncCrashLosesNothingAcknowledged(t *testing.T) {
	t.Parallel()
	crashLoad(t, "crash", 5000, 32, 1)
}

// TestAsyncRepeatedCrashesLoseNothingAcknowledged is the same promise under repeated crashes:
// during one load of 20,000 events Caddy is killed with -9 five times and started again each
// time. Every acknowledged event reaches the upstream, and the duplicates there are at most the
// events attempted and not yet recorded at each kill: deliver.UnrecordedPerWorker × workers × kills.
func TestAsyncRepeatedCrashesLoseNothingAcknowledged(t *testing.T) {
	t.Parallel()
	crashLoad(t, "crashes", 20000, 64, 5)
}

// crashLoad sends total signed events from senders concurrent providers, which resend on a
// connection error or a 503 until each event is acknowledged, and kills Caddy with -9 kills
// times, evenly through the acknowledgements, starting it again each time.
func crashLoad(t *testing.T, name string, total, senders, kills int) {
	const workers = 16 // the example's forward { workers }
	up := hooktest.NewUpstream(t)
	g := newBinaryGateway(t, "examples/async.Caddyfile")
	g.env = append(g.env,
		"STANDARD_WEBHOOK_SECRET="+hooktest.Secret,
		fmt.Sprintf("HOOKGATE_FORWARD_PORT=%d", up.Listener.Addr().(*net.TCPAddr).Port),
	)
	g.start(t)
	url := fmt.Sprintf("http://localhost:%d/hooks/orders", g.port)

	var (
		next, ackCount   atomic.Int64
		ackedAsDuplicate atomic.Int64
		mu               sync.Mutex
		acked            []string
		wg               sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	for range senders {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(total); i = next.Add(1) {
				ev := hooktest.NewEvent(t, fmt.Sprintf("evt_%s_%d", name, i), fmt.Sprintf("obj_%s_%d", name, i), 1)
				// Like a provider: resend until acknowledged. A 200 duplicate acknowledges too:
				// the event was queued, and its 202 lost in a kill.
				for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					got, err := hooktest.TrySendTo(client, url, ev)
					if err == nil && (got.Status == http.StatusAccepted || got.Status == http.StatusOK) {
						mu.Lock()
						acked = append(acked, ev.ID)
						mu.Unlock()
						ackCount.Add(1)
						if got.Status == http.StatusOK {
							ackedAsDuplicate.Add(1)
						}
						break
					}
				}
			}
		})
	}

	var atKills []string
	for k := 1; k <= kills; k++ {
		threshold := int64(k * total / (kills + 1))
		hooktest.WaitFor(t, fmt.Sprintf("%d acknowledged before kill %d", threshold, k), 60*time.Second, func() bool {
			return ackCount.Load() >= threshold
		})
		g.kill()
		atKills = append(atKills, fmt.Sprintf("%d acked/%d delivered", ackCount.Load(), up.Total()))
		time.Sleep(200 * time.Millisecond) // the senders keep trying against a dead gateway
		g.start(t)
	}
	wg.Wait()
	loaded := time.Since(start)
	if len(acked) != total {
		t.Fatalf("%d of %d events acknowledged", len(acked), total)
	}

	hooktest.WaitFor(t, "every acknowledged event at the upstream", 120*time.Second, func() bool {
		for _, id := range acked {
			if up.Count(id) == 0 {
				return false
			}
		}
		return true
	})
	deliveries := up.Total()
	duplicates := deliveries - total // each acknowledged ID counted once, every ID acknowledged
	// At a kill, events attempted and not yet recorded (in flight, or answered and waiting for
	// their outcome's synced write) are at most deliver.UnrecordedPerWorker × the workers.
	bound := deliver.UnrecordedPerWorker * workers * kills
	t.Logf("%d events acknowledged (%d of them as a duplicate, their 202 lost in a kill), %d deliveries, %d duplicates (bound %d = %d × %d workers × %d kills) in %v (all acknowledged after %v); at the kills: %v",
		total, ackedAsDuplicate.Load(), deliveries, duplicates, bound, deliver.UnrecordedPerWorker, workers, kills,
		time.Since(start).Round(time.Millisecond), loaded.Round(time.Millisecond), atKills)
	if duplicates > bound {
		t.Fatalf("%d duplicates at the upstream, more than the %d events that can be sent and unrecorded at %d kills", duplicates, bound, kills)
	}
}
