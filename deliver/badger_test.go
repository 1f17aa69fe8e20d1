package deliver

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/badgerstore"
	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/internal/redistest"
)

// With thousands of workers, the deliverer asks the real store for thousands of events at once;
// that Lease used to exceed Badger's limit on a transaction and fail every time, so nothing
// was ever delivered.
func TestThousandsOfWorkersDeliverEachEventOnceFromBadger(t *testing.T) {
	store := openBadger(t)
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

// The deliverer drops an event's body and headers once its attempt ends; the store keeps them.
// A retry, and a dead letter's replay, are leased again from Badger or Redis and sent as the
// first attempt was: same body, same headers, signed over the same.
func TestRetryAndReplaySendTheBodyAndHeadersAgain(t *testing.T) {
	stores := map[string]func(t *testing.T) dedupe.Outbox{
		"badger": func(t *testing.T) dedupe.Outbox {
			store, err := badgerstore.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { store.Close() })
			return store
		},
		"redis": func(t *testing.T) dedupe.Outbox {
			server, err := redistest.Start(filepath.Join(t.TempDir(), "redis"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(server.Stop)
			store := redisstore.New(redis.NewClient(&redis.Options{Addr: server.Addr}), "replay")
			t.Cleanup(func() { store.Close() })
			return store
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			retryAndReplay(t, open(t))
		})
	}
}

func retryAndReplay(t *testing.T, store dedupe.Outbox) {
	up := newUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable) // retried
		case 2:
			w.WriteHeader(http.StatusBadRequest) // dead letter
		}
	})
	ev := testEvent("evt_1", `{"amount":42}`)
	ev.Header.Set("X-Provider-Signature", "v1,abc")
	if _, err := store.Accept(context.Background(), dedupe.Claim{Namespace: testNamespace}, ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, up.URL)
	cfg.Sign = func(req *http.Request, ev *dedupe.Event) error { // as resign, which signs the event's body
		req.Header.Set("X-Signed", fmt.Sprintf("%s %s", ev.Header.Get("X-Provider-Signature"), ev.Body))
		return nil
	}
	d := startDelivererWithLogger(t, store, cfg, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	waitFor(t, 10*time.Second, "the event dead-lettered", func() bool {
		dead, err := store.List(context.Background(), testNamespace, dedupe.Dead, dedupe.Cursor{}, 1)
		return err == nil && len(dead) == 1 && d.Status().InFlight == 0
	})
	if err := store.Replay(context.Background(), testNamespace, "evt_1", time.Now()); err != nil {
		t.Fatal(err)
	}
	d.Notify()
	waitFor(t, 10*time.Second, "the replay delivered", func() bool { return up.count() == 3 && d.Status().InFlight == 0 })
	for i, r := range up.received() {
		if string(r.Body) != `{"amount":42}` || r.Header.Get("X-Provider-Signature") != "v1,abc" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("attempt %d sent body %q, headers %v; want the accepted body and headers", i+1, r.Body, r.Header)
		}
		if got, want := r.Header.Get("X-Signed"), `v1,abc {"amount":42}`; got != want {
			t.Errorf("attempt %d was signed over %q, want %q", i+1, got, want)
		}
	}
	if n := d.Status().HeldBytes; n != 0 {
		t.Errorf("with the event delivered, the deliverer still holds %d bytes of bodies", n)
	}
}

// openBadger opens a Badger store in a temporary directory, closed when the test ends.
func openBadger(t testing.TB) *badgerstore.Store {
	t.Helper()
	store, err := badgerstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}
