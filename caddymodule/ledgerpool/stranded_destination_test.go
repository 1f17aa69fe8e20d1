package ledgerpool

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
)

// A route that had a lone `forward URL` and now has only named destinations leaves
// its `default` queue behind. The route is running and async, so the warning must say which
// destination is missing (default), not that no async route has the namespace's name.
func TestStrandedDefaultQueueOfARunningRouteNamesTheDestination(t *testing.T) {
	pool := newBadgerPool(BadgerTarget(t.TempDir()), DefaultMinFree)
	defer pool.Destruct()
	pool.disk.free = func(string) (uint64, error) { return 1 << 30, nil }
	ctx := context.Background()
	ev := &dedupe.Event{ID: "evt_1", Method: "POST", URI: "/hooks", Body: []byte("{}")}
	if _, err := pool.Accept(ctx, dedupe.Claim{Namespace: "orders", ID: "evt_1", Lease: time.Minute}, ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	// The config's route orders delivers to billing and analytics, not to default.
	pool.WarnStranded(zap.New(core), map[string]bool{
		dedupe.QueueNamespace("orders", "billing"):   true,
		dedupe.QueueNamespace("orders", "analytics"): true,
	})
	all := logs.All()
	if len(all) != 1 {
		t.Fatalf("warnings: %v, want one", all)
	}
	if got := all[0].ContextMap()["destination"]; got != dedupe.DefaultDestination {
		t.Errorf("the warning for orders' default queue: %q %v; want it to name destination %q (route orders runs, but without a `forward URL` / `forward default URL`)",
			all[0].Message, all[0].ContextMap(), dedupe.DefaultDestination)
	}
}
