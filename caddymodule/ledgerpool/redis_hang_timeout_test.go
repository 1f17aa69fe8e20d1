package ledgerpool

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// Storage.ReadTimeout's doc: "a Redis that hangs gets a request answered 503 after about twice
// this" (4 s by default, inside Shopify's 5 s). A hung Redis (SIGSTOP: it accepts connections
// but never answers) with more requests in flight than the client has connections (10 per
// core) holds each request much longer: it waits for a connection (PoolTimeout, read timeout
// + 1 s), is retried, waits again, so the provider times out instead of getting its 503.
func TestHungRedisAnswers503WithinTwiceReadTimeout(t *testing.T) {
	srv := redistest.Run(t, redistest.Durable...)
	pool, _ := newTestRedisPool(t, srv.Addr)
	ctx := context.Background()
	if _, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: "warm", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(srv.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(srv.Pid(), syscall.SIGCONT) })

	const inFlight = 60
	bound := 2*DefaultRedisReadTimeout + time.Second // "about twice", with room for a loaded machine
	var mu sync.Mutex
	var worst time.Duration
	answers := map[string]int{}
	var wg sync.WaitGroup
	for i := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			_, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: fmt.Sprintf("evt_hang_%d", i), Lease: time.Minute})
			took := time.Since(began)
			mu.Lock()
			defer mu.Unlock()
			worst = max(worst, took)
			answers[fmt.Sprint(err)]++
		}()
	}
	wg.Wait()
	if answers[errRedisDown.Error()] != inFlight {
		t.Fatalf("answers on a hung Redis: %v", answers)
	}
	if worst > bound {
		t.Fatalf("%d requests in flight on a hung Redis: the slowest got its 503 after %v, past %v (2 × read_timeout + 1 s)", inFlight, worst.Round(time.Millisecond), bound)
	}
}
