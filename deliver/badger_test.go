package deliver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/badgerstore"
)

// With thousands of workers, the deliverer asks the real store for thousands of events at once;
// that Lease used to exceed Badger's limit on a transaction and fail every time, so nothing
// was ever delivered.
func TestThousandsOfWorkersDeliverEachEventOnceFromBadger(t *testing.T) {
	store, err := badgerstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	const events, workers = 6000, 3000
	acceptConcurrently(t, store, events)

	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	cfg.Workers = workers
	// No attempt may time out on a busy machine: the upstream would count its retry twice.
	cfg.Timeout = 30 * time.Second
	d := New(store, testNamespace, cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	d.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	waitFor(t, 60*time.Second, "every event delivered", func() bool {
		pending, err := store.List(context.Background(), testNamespace, dedupe.Pending, dedupe.Cursor{}, 1)
		return err == nil && len(pending) == 0 && d.Status().InFlight == 0
	})

	got := make(map[string]int)
	for _, r := range up.received() {
		got[r.Header.Get("Hookgate-Event-Id")]++
	}
	if len(got) != events {
		t.Errorf("upstream got %d distinct events, want %d", len(got), events)
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
}

// acceptConcurrently queues n events in store from concurrent callers, as requests would.
func acceptConcurrently(t *testing.T, store dedupe.Outbox, n int) {
	t.Helper()
	const callers = 64
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := c; i < n; i += callers {
				ev := testEvent(fmt.Sprintf("evt_%05d", i), "{}")
				if _, err := store.Accept(context.Background(), dedupe.Claim{Namespace: testNamespace}, ev, time.Hour); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
