//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// TestTwoNodesOnRedisShareTheRate runs two Caddy processes on one Redis with the same route under
// `rate 20/s`, each acknowledging half of 200 events: together they start no more than 20
// attempts in any second (+1 at the window's edge), not 20 each, and every event arrives once.
func TestTwoNodesOnRedisShareTheRate(t *testing.T) {
	t.Parallel()
	rd := durableRedis(t)
	sink := newDeliverySink(t, 0)
	var nodes [2]*gatewayNode
	for i := range nodes {
		nodes[i] = startRatedNode(t, fmt.Sprintf("node%c", 'A'+i), redisStorage(false, rd.Addr), sink.URL, "20/s")
	}
	client := twoNodeClient()

	const events = 200
	ids := make([]string, events)
	sending := time.Now()
	parallel(events, 16, func(i int) {
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_rate_%d", i), fmt.Sprintf("obj_rate_%d", i), 1)
		ids[i] = ev.ID
		if got, err := hooktest.TrySendTo(client, nodes[i%2].url("rated"), ev); answerKind(got, err) != "accepted" {
			t.Errorf("event %d: %s", i, answerKind(got, err))
		}
	})
	sent := time.Since(sending)
	sink.waitDelivered(t, ids, 90*time.Second)

	sink.mu.Lock()
	arrivals := make([]time.Time, 0, len(sink.firstAt))
	for _, at := range sink.firstAt {
		arrivals = append(arrivals, at)
	}
	deliveries := sink.deliveries
	sink.mu.Unlock()
	slices.SortFunc(arrivals, time.Time.Compare)
	busiest := 0
	for first := range arrivals {
		n, _ := slices.BinarySearchFunc(arrivals, arrivals[first].Add(time.Second), time.Time.Compare)
		busiest = max(busiest, n-first)
	}
	spread := arrivals[len(arrivals)-1].Sub(arrivals[0])
	t.Logf("%d events acknowledged by two nodes in %v reached the app over %v; busiest second held %d",
		len(arrivals), sent.Round(time.Millisecond), spread.Round(time.Millisecond), busiest)
	// The limiter holds 21 starts per second (N+1 at the window's edge), shown on the starts
	// themselves by deliver's TestRateLimitIsSharedByNodesOnRedis. Here the times are arrivals at
	// the app: each start's trip through a loaded Caddy process and the sink's own wake-up can
	// bunch two or three of them into one second, while rates kept per node put 40 there.
	if busiest > 24 {
		t.Errorf("a one-second window held %d deliveries from the two nodes, want at most 24 (21 starts, 3 bunched on the way) under a shared rate 20/s", busiest)
	}
	if deliveries != events {
		t.Errorf("%d deliveries of %d events; want each once", deliveries, events)
	}
	if spread < 9*time.Second {
		t.Errorf("200 events at a shared 20/s reached the app within %v, which the limit cannot allow", spread)
	}
}

// startRatedNode starts a node whose one async route, rated, forwards to sinkURL under rate.
func startRatedNode(t *testing.T, name, storage, sinkURL, rate string) *gatewayNode {
	t.Helper()
	g := newBinaryGateway(t, filepath.Join(t.TempDir(), "Caddyfile"))
	config := fmt.Sprintf(`{
	admin {$HOOKGATE_ADMIN}
}

http://:{$HOOKGATE_PORT} {
	bind 127.0.0.1
	hookgate /rated {
		preset standard
		name rated
		secret {env.HOOKGATE_SECRET}
		%s
		forward %s {
			timeout 2s
			workers %d
			rate %s
		}
	}
}
`, storage, sinkURL, twoNodeWorkers, rate)
	if err := os.WriteFile(g.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &gatewayNode{binaryGateway: g, name: name, log: newTailLog(t, name)}
	n.start(t)
	return n
}
