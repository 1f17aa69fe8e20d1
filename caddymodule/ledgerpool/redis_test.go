package ledgerpool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// newTestRedisPool is a pool entry on the server at addr whose log lines the test reads.
func newTestRedisPool(t *testing.T, addr string) (*Ledger, *observer.ObservedLogs) {
	t.Helper()
	opts := NewRedisOptions()
	opts.Addrs = []string{addr}
	return newTestRedisPoolOn(t, opts)
}

// newTestRedisPoolOn is a pool entry on the Redis client opts (its prefix the test's name) whose
// log lines the test reads.
func newTestRedisPoolOn(t *testing.T, opts *redis.UniversalOptions) (*Ledger, *observer.ObservedLogs) {
	t.Helper()
	scope := fmt.Sprint(opts.Addrs, opts.Username, t.Name())
	pool := newRedisPool(Target{Key: scope, Scope: scope, Name: scope, Redis: &RedisTarget{Options: opts, Prefix: t.Name()}})
	core, logs := observer.New(zap.InfoLevel)
	pool.logger = zap.New(core)
	t.Cleanup(func() { pool.Destruct() })
	return pool, logs
}

func countLogs(logs *observer.ObservedLogs, level zapcore.Level, snippet string) int {
	return logs.FilterLevelExact(level).FilterMessageSnippet(snippet).Len()
}

// claimer claims an ID on route "r" of pool, with a one-minute lease.
func claimer(ctx context.Context, pool *Ledger) func(id string) error {
	return func(id string) error {
		_, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: id, Lease: time.Minute})
		return err
	}
}

// restartAndWaitForClaims restarts srv and waits until claim succeeds again.
func restartAndWaitForClaims(t *testing.T, srv *redistest.Server, claim func(id string) error) {
	t.Helper()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	hooktest.WaitFor(t, "claims to work again", 10*time.Second, func() bool { return claim(fmt.Sprintf("evt_up_%d", time.Now().UnixNano())) == nil })
}

// claimAfter claims n more IDs, evt_after_0 onwards, each of which must succeed.
func claimAfter(t *testing.T, claim func(id string) error, n int) {
	t.Helper()
	for i := range n {
		if err := claim(fmt.Sprintf("evt_after_%d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// A Redis without an fsync'ed append-only file cannot keep the promise that an acknowledged
// event survives its restart: one WARN says so, however many requests follow.
func TestRedisPersistenceWarnedOnce(t *testing.T) {
	srv := redistest.Run(t, "appendonly yes", "appendfsync everysec")
	pool, logs := newTestRedisPool(t, srv.Addr)
	ctx := context.Background()
	for i := range 20 {
		c := dedupe.Claim{Namespace: "r", ID: fmt.Sprintf("evt_%d", i), Lease: time.Minute}
		if _, err := pool.Claim(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	hooktest.WaitFor(t, "the persistence WARN", 10*time.Second, func() bool { return countLogs(logs, zap.WarnLevel, "appendfsync everysec") > 0 })
	time.Sleep(100 * time.Millisecond)
	if n := countLogs(logs, zap.WarnLevel, "appendfsync"); n != 1 {
		t.Fatalf("%d persistence WARNs after 20 claims, want 1", n)
	}

	durable := redistest.Run(t, redistest.Durable...)
	pool, logs = newTestRedisPool(t, durable.Addr)
	if _, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: "evt", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	hooktest.WaitFor(t, "the persistence INFO", 10*time.Second, func() bool { return countLogs(logs, zap.InfoLevel, "writes every event to disk") == 1 })
	if n := len(logs.FilterLevelExact(zap.WarnLevel).All()); n != 0 {
		t.Fatalf("%d WARNs on a durable Redis: %v", n, logs.All())
	}
}

// While Redis is down every call fails at once with ErrRedisDown (a 503 with its reason), the
// outage is logged once as it begins and once as it ends, and the pool works again by itself.
func TestRedisOutageLoggedOncePerChange(t *testing.T) {
	srv := redistest.Run(t, redistest.Durable...)
	pool, logs := newTestRedisPool(t, srv.Addr)
	ctx := context.Background()
	claim := claimer(ctx, pool)
	if err := claim("evt_before"); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	for i := range 50 {
		began := time.Now()
		err := claim(fmt.Sprintf("evt_down_%d", i))
		if !errors.Is(err, ErrRedisDown) {
			t.Fatalf("claim with Redis down: %v, want ErrRedisDown", err)
		}
		if took := time.Since(began); took > DefaultRedisReadTimeout {
			t.Fatalf("a claim with Redis down took %v, longer than the read timeout %v", took, DefaultRedisReadTimeout)
		}
	}
	if _, err := pool.Lease(ctx, "r", time.Now(), 10, time.Minute); !errors.Is(err, ErrRedisDown) {
		t.Fatalf("lease with Redis down: %v, want ErrRedisDown", err)
	}

	restartAndWaitForClaims(t, srv, claim)
	claimAfter(t, claim, 10)
	if down, up := countLogs(logs, zap.ErrorLevel, "is unavailable"), countLogs(logs, zap.InfoLevel, "is back"); down != 1 || up != 1 {
		t.Fatalf("%d ERROR and %d INFO lines for one outage, want 1 and 1: %v", down, up, logs.All())
	}
}

// A least-privilege ACL user (+@all -@dangerous, the common setup) may not run CONFIG: hookgate
// cannot read the persistence settings and says so in one WARN; that is no outage, so no ERROR
// "unavailable" and INFO "is back" lines, however many requests and deliverer polls follow.
func TestRedisUserWithoutConfigWarnsOnceAndIsNeverUnavailable(t *testing.T) {
	srv := redistest.Run(t, redistest.Durable...)
	if _, err := srv.Command("acl", "setuser", "hookgate", "on", ">s3cret", "~*", "&*", "+@all", "-@dangerous"); err != nil {
		t.Fatal(err)
	}
	opts := NewRedisOptions()
	opts.Addrs, opts.Username, opts.Password = []string{srv.Addr}, "hookgate", "s3cret"
	pool, logs := newTestRedisPoolOn(t, opts)
	ctx := context.Background()
	request := func(i int) {
		t.Helper()
		id := fmt.Sprintf("evt_%d", i)
		ev := &dedupe.Event{ID: id, Method: "POST", URI: "/", AcceptedAt: time.Now()}
		if out, err := pool.Accept(ctx, dedupe.Claim{Namespace: "r", ID: id, Lease: time.Minute}, ev, time.Hour); err != nil || out != dedupe.Claimed {
			t.Fatalf("request %d: %v %v, want it accepted", i, out, err)
		}
		if _, err := pool.Lease(ctx, "r", time.Now(), 1, time.Minute); err != nil { // the deliverer's poll
			t.Fatalf("poll %d: %v", i, err)
		}
	}
	for i := range 100 {
		request(i)
	}
	hooktest.WaitFor(t, "the persistence check's line", 10*time.Second, func() bool {
		return countLogs(logs, zap.WarnLevel, "could not read Redis's persistence settings") > 0 || len(logs.FilterLevelExact(zap.ErrorLevel).All()) > 0
	})
	for i := 100; i < 200; i++ {
		request(i)
	}
	errors, back, warns := len(logs.FilterLevelExact(zap.ErrorLevel).All()), countLogs(logs, zap.InfoLevel, "is back"), len(logs.FilterLevelExact(zap.WarnLevel).All())
	if errors != 0 || back != 0 || warns != 1 {
		t.Fatalf("200 requests by a user without CONFIG: %d ERROR, %d 'is back' and %d WARN lines, want 0, 0 and 1: %v", errors, back, warns, logs.All())
	}
}

// A failover (Sentinel promoting a replica, a managed Redis replacing its server behind the same
// name) can put a server with other persistence settings behind the client: they are read again
// after the client reconnects, and a change is logged once.
func TestRedisPersistenceCheckedAgainAfterReconnect(t *testing.T) {
	srv := redistest.Run(t, redistest.Durable...)
	pool, logs := newTestRedisPool(t, srv.Addr)
	ctx := context.Background()
	claim := claimer(ctx, pool)
	if err := claim("evt_before"); err != nil {
		t.Fatal(err)
	}
	hooktest.WaitFor(t, "the durable INFO", 10*time.Second, func() bool { return countLogs(logs, zap.InfoLevel, "writes every event to disk") == 1 })

	// The server behind the address comes back without the append-only file.
	srv.Stop()
	conf := filepath.Join(srv.Dir, "redis.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("appendonly no\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	restartAndWaitForClaims(t, srv, claim)
	hooktest.WaitFor(t, "the WARN about the new server's persistence", 10*time.Second, func() bool {
		return countLogs(logs, zap.WarnLevel, "without the append-only file") > 0
	})
	claimAfter(t, claim, 20)
	if warns, infos := countLogs(logs, zap.WarnLevel, "without the append-only file"), countLogs(logs, zap.InfoLevel, "writes every event to disk"); warns != 1 || infos != 1 {
		t.Fatalf("%d WARNs for the new settings and %d INFOs for the old ones, want 1 and 1: %v", warns, infos, logs.All())
	}
}

// On a Cluster each route lives on one shard: a shard that cannot serve one route's slot
// (TRYAGAIN while the slot moves, CLUSTERDOWN) makes that route unavailable, logged once for
// it, while another route's requests, served by their shard, neither report an outage nor its
// end each time they succeed.
func TestRedisClusterSlotRefusalIsItsRoutesOutageOnly(t *testing.T) {
	t.Parallel()
	c := redistest.DurableCluster(t)
	opts := NewRedisOptions()
	opts.Addrs, opts.IsClusterMode = []string{c.Nodes[0].Addr}, true
	pool, logs := newTestRedisPoolOn(t, opts)
	ctx := context.Background()
	accept := func(ns, id string) error {
		ev := &dedupe.Event{ID: id, Method: "POST", URI: "/", AcceptedAt: time.Now()}
		_, err := pool.Accept(ctx, dedupe.Claim{Namespace: ns, ID: id, Lease: time.Minute}, ev, time.Hour)
		return err
	}
	for _, ns := range []string{"moving", "calm"} {
		if err := accept(ns, "evt_first"); err != nil { // the route's slot holds keys
			t.Fatal(err)
		}
	}
	// "moving"'s slot starts moving to another master, as redis-cli --cluster reshard does, and
	// stays half-way: its scripts are answered TRYAGAIN.
	slot, err := c.Nodes[0].Command("cluster", "keyslot", "{"+t.Name()+":moving}:")
	if err != nil {
		t.Fatal(err)
	}
	var src, dst *redistest.Server
	for _, n := range c.Nodes {
		if keys, _ := n.Command("cluster", "countkeysinslot", slot); keys != "0" {
			src = n
		} else if dst == nil {
			dst = n
		}
	}
	srcID, _ := src.Command("cluster", "myid")
	dstID, _ := dst.Command("cluster", "myid")
	for _, cmd := range [][]string{{"cluster", "setslot", slot, "importing", srcID}, {"cluster", "setslot", slot, "migrating", dstID}} {
		node := dst
		if cmd[3] == "migrating" {
			node = src
		}
		if out, err := node.Command(cmd...); err != nil || out != "OK" {
			t.Fatalf("%v: %q %v", cmd, out, err)
		}
	}
	for i := range 20 {
		if err := accept("moving", fmt.Sprintf("evt_%d", i)); !errors.Is(err, ErrRedisDown) {
			t.Fatalf("accept on the moving slot: %v, want ErrRedisDown", err)
		}
		if err := accept("calm", fmt.Sprintf("evt_%d", i)); err != nil {
			t.Fatalf("accept on another route: %v", err)
		}
	}
	down := logs.FilterLevelExact(zap.ErrorLevel).FilterMessageSnippet("is unavailable")
	if down.Len() != 1 || down.FilterField(zap.String("route", "moving")).Len() != 1 || countLogs(logs, zap.InfoLevel, "is back") != 0 {
		t.Fatalf("one route's slot refused 20 times, another route served 20 times: %v, want one ERROR for route moving and no 'is back'", logs.All())
	}
	for _, n := range []*redistest.Server{src, dst} {
		if _, err := n.Command("cluster", "setslot", slot, "stable"); err != nil {
			t.Fatal(err)
		}
	}
	if err := accept("moving", "evt_after"); err != nil {
		t.Fatalf("accept once the slot is stable again: %v", err)
	}
	back := logs.FilterLevelExact(zap.InfoLevel).FilterMessageSnippet("is back")
	if back.Len() != 1 || back.FilterField(zap.String("route", "moving")).Len() != 1 {
		t.Fatalf("the moving route served again: %v, want one 'is back' for it", logs.All())
	}
}

// Under an evicting maxmemory-policy Redis drops event hashes here and there among the queued
// events, and the deliverer meets such entries poll after poll: the loss is logged at most once
// a minute per route, with the count, not once per poll that dropped any.
func TestRedisGoneQueuedEventsLoggedAtMostOnceAMinute(t *testing.T) {
	srv := redistest.Run(t, redistest.Durable...)
	pool, logs := newTestRedisPool(t, srv.Addr)
	ctx := context.Background()
	const events = 400
	for i := range events {
		id := fmt.Sprintf("evt_%03d", i)
		ev := &dedupe.Event{ID: id, Method: "POST", URI: "/", AcceptedAt: time.Now()}
		if _, err := pool.Accept(ctx, dedupe.Claim{Namespace: "r", ID: id, Lease: time.Minute}, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < events; i += 2 { // every other event's data goes, as eviction would have it
		if _, err := srv.Command("del", fmt.Sprintf("{%s:r}:e:evt_%03d", t.Name(), i)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	delivered := 0
	for polls := 0; delivered < events/2; polls++ {
		if polls > events {
			t.Fatalf("%d polls delivered %d of %d events", polls, delivered, events/2)
		}
		leased, err := pool.Lease(ctx, "r", time.Now(), 2, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range leased {
			ev.State = dedupe.Delivered
			if err := pool.Update(ctx, ev, time.Hour); err != nil {
				t.Fatal(err)
			}
			delivered++
		}
	}
	lines := logs.FilterLevelExact(zap.WarnLevel).FilterMessageSnippet("dropped queued events").Len()
	if allowed := 1 + int(time.Since(start)/goneLogEvery); lines == 0 || lines > allowed {
		t.Fatalf("the deliverer's polls dropped %d gone events: %d WARN lines, want 1 to %d: %v", events/2, lines, allowed, logs.All())
	}
}
