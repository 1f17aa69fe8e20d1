package ledgerpool

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// warmRedisPool is a pool entry on a durable Redis of the test's own that has answered once.
func warmRedisPool(t *testing.T) (*redistest.Server, *Ledger) {
	t.Helper()
	srv := redistest.Run(t, redistest.Durable...)
	pool, _ := newTestRedisPool(t, srv.Addr)
	if _, err := pool.Claim(context.Background(), dedupe.Claim{Namespace: "r", ID: "warm", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	return srv, pool
}

// hang stops Redis (SIGSTOP: it accepts connections but never answers) until the test ends.
func hang(t *testing.T, srv *redistest.Server) {
	t.Helper()
	if err := syscall.Kill(srv.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(srv.Pid(), syscall.SIGCONT) })
}

// Storage.ReadTimeout's doc: "a Redis that hangs gets a request answered 503 after about twice
// this" (4 s by default, inside Shopify's 5 s). A hung Redis (SIGSTOP: it accepts connections
// but never answers) with more requests in flight than the client has connections (10 per
// core) holds each request much longer: it waits for a connection (PoolTimeout, read timeout
// + 1 s), is retried, waits again, so the provider times out instead of getting its 503.
func TestHungRedisAnswers503WithinTwiceReadTimeout(t *testing.T) {
	srv, pool := warmRedisPool(t)
	ctx := context.Background()
	hang(t, srv)

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
	if answers[ErrRedisDown.Error()] != inFlight {
		t.Fatalf("answers on a hung Redis: %v", answers)
	}
	if worst > bound {
		t.Fatalf("%d requests in flight on a hung Redis: the slowest got its 503 after %v, past %v (2 × read_timeout + 1 s)", inFlight, worst.Round(time.Millisecond), bound)
	}
}

// 500 requests on a hung Redis (SIGSTOP) each get their 503 at the deadline while `within`'s
// goroutine waits on for the pipelined script. Once Redis answers again (SIGCONT), those
// goroutines must end, and the claims the 503'd requests queued must not hold their events:
// the provider's retry must be claimable, not refused as still being processed.
func TestHungRedisDeadlineLeavesNoClaimBehind(t *testing.T) {
	srv, pool := warmRedisPool(t)
	ctx := context.Background()
	runtime.GC()
	before := runtime.NumGoroutine()
	hang(t, srv)

	const inFlight = 500
	var mu sync.Mutex
	answers := map[string]int{}
	var wg sync.WaitGroup
	began := time.Now()
	for i := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: fmt.Sprintf("evt_%d", i), Lease: time.Minute})
			mu.Lock()
			answers[fmt.Sprint(err)]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	answered := time.Since(began)
	during := runtime.NumGoroutine()
	if err := syscall.Kill(srv.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var after int
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if after = runtime.NumGoroutine(); after <= before+5 {
			break
		}
	}
	settled := time.Since(began)
	t.Logf("answers %v in %v; goroutines before %d, after the 503s %d, %v after SIGCONT %d", answers, answered.Round(time.Millisecond),
		before, during, (settled - answered).Round(time.Millisecond), after)
	if after > before+5 {
		t.Errorf("%d goroutines left %v after Redis answered again (%d before)", after, settled-answered, before)
	}
	held := 0
	for i := range inFlight {
		out, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: fmt.Sprintf("evt_%d", i), Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if out != dedupe.Claimed {
			held++
		}
	}
	if held > 0 {
		t.Errorf("%d of %d events answered 503 on the hung Redis are still held by the claims they queued: the provider's retry is refused (Processing) until the lease lapses", held, inFlight)
	}
}
