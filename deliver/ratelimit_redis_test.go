package deliver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/internal/redistest"
)

// Two nodes on one Redis share the route's rate: together they start no more than 20 attempts
// in any second (+1 at the edge), not 20 each, and every event arrives once.
func TestRateLimitIsSharedByNodesOnRedis(t *testing.T) {
	t.Parallel()
	server, err := redistest.Start(filepath.Join(t.TempDir(), "redis"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Stop)
	node := func() *redisstore.Store {
		s := redisstore.New(redis.NewClient(&redis.Options{Addr: server.Addr}), "rate")
		t.Cleanup(func() { s.Close() })
		return s
	}
	first, second := node(), node()
	const events = 200
	acceptConcurrently(t, first, events)

	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	cfg.Workers = 16
	cfg.Rate = Rate{Starts: 20, Per: time.Second}
	for _, store := range []*redisstore.Store{first, second} {
		startDelivererWithLogger(t, store, cfg, nil)
	}

	waitFor(t, 60*time.Second, "all delivered", func() bool {
		pending, err := first.Pending(context.Background(), testNamespace)
		return err == nil && pending == 0 && up.count() >= events
	})
	got := up.received()
	busiest := expectWithinRate(t, arrivals(got), cfg.Rate)
	t.Logf("%d events delivered by two nodes; busiest second held %d attempts", len(got), busiest)
	if len(got) != events {
		t.Errorf("upstream got %d requests for %d events", len(got), events)
	}
	delivered, err := first.List(context.Background(), testNamespace, dedupe.Delivered, dedupe.Cursor{}, events+1)
	if err != nil || len(delivered) != events {
		t.Errorf("%d events listed delivered (%v), want %d", len(delivered), err, events)
	}
}
