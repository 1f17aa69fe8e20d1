package caddymodule

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAsyncCrashLosesNothingAcknowledged is the promise to operators, shown with the built
// binary and examples/async.Caddyfile: under a load of signed events Caddy is killed with -9 and
// started again; every event that got a 2xx reaches the upstream, and the only duplicates are
// the few that were in flight at the kill.
func TestAsyncCrashLosesNothingAcknowledged(t *testing.T) {
	const (
		total   = 5000
		senders = 32
		killAt  = total / 3 // acknowledged events before the kill
		workers = 16        // the example's forward { workers }
	)
	up := newUpstream(t)
	g := newBinaryGateway(t, "examples/async.Caddyfile")
	g.env = append(g.env,
		"STANDARD_WEBHOOK_SECRET="+testSecret,
		fmt.Sprintf("HOOKGATE_FORWARD_PORT=%d", up.Listener.Addr().(*net.TCPAddr).Port),
	)
	g.start(t)
	url := fmt.Sprintf("http://localhost:%d/hooks/orders", g.port)

	var (
		next, ackCount atomic.Int64
		mu             sync.Mutex
		acked          []string
		wg             sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	for range senders {
		wg.Go(func() {
			for i := next.Add(1); i <= total; i = next.Add(1) {
				ev := newEvent(t, fmt.Sprintf("evt_crash_%d", i), fmt.Sprintf("obj_crash_%d", i), 1)
				// Like a provider: resend until acknowledged (the gateway may be down meanwhile).
				for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					got, err := trySendTo(client, url, ev)
					if err == nil && got.status >= 200 && got.status < 300 {
						mu.Lock()
						acked = append(acked, ev.id)
						mu.Unlock()
						ackCount.Add(1)
						break
					}
				}
			}
		})
	}

	waitFor(t, "the first third acknowledged", 60*time.Second, func() bool { return ackCount.Load() >= killAt })
	g.kill()
	killedAt, deliveredAtKill := ackCount.Load(), up.total()
	time.Sleep(300 * time.Millisecond) // the senders keep trying against a dead gateway
	g.start(t)
	wg.Wait()
	if len(acked) != total {
		t.Fatalf("%d of %d events acknowledged", len(acked), total)
	}

	waitFor(t, "every acknowledged event at the upstream", 120*time.Second, func() bool {
		for _, id := range acked {
			if up.count(id) == 0 {
				return false
			}
		}
		return true
	})
	duplicates := up.total() - total
	t.Logf("%d events acknowledged in %v (kill -9 after %d acks, %d delivered by then); all %d reached the upstream; %d duplicates (in flight at the kill; bound %d)",
		total, time.Since(start).Round(time.Millisecond), killedAt, deliveredAtKill, total, duplicates, workers)
	if duplicates > workers {
		t.Fatalf("%d duplicates at the upstream, more than the %d attempts that can be in flight", duplicates, workers)
	}
}
