package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// startRedis starts a redis-server of the test's own, killed when the test ends.
func startRedis(t *testing.T, config ...string) *redistest.Server {
	t.Helper()
	srv, err := redistest.Start(filepath.Join(t.TempDir(), "redis"), config...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	return srv
}

// newTestRedisPool is a pool entry on the server at addr whose log lines the test reads.
func newTestRedisPool(t *testing.T, addr string) (*pooledLedger, *observer.ObservedLogs) {
	t.Helper()
	h := Handler{Storage: &Storage{Backend: "redis", URLs: []string{"redis://" + addr}, Prefix: t.Name()}}
	target, err := h.storeTarget()
	if err != nil {
		t.Fatal(err)
	}
	pool := newRedisPool(target)
	core, logs := observer.New(zap.InfoLevel)
	pool.logger = zap.New(core)
	t.Cleanup(func() { pool.Destruct() })
	return pool, logs
}

func countLogs(logs *observer.ObservedLogs, level zapcore.Level, snippet string) int {
	return logs.FilterLevelExact(level).FilterMessageSnippet(snippet).Len()
}

// A Redis without an fsync'ed append-only file cannot keep the promise that an acknowledged
// event survives its restart: one WARN says so, however many requests follow.
func TestRedisPersistenceWarnedOnce(t *testing.T) {
	srv := startRedis(t, "appendonly yes", "appendfsync everysec")
	pool, logs := newTestRedisPool(t, srv.Addr)
	ctx := context.Background()
	for i := range 20 {
		c := dedupe.Claim{Namespace: "r", ID: fmt.Sprintf("evt_%d", i), Lease: time.Minute}
		if _, err := pool.Claim(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the persistence WARN", 10*time.Second, func() bool { return countLogs(logs, zap.WarnLevel, "appendfsync everysec") > 0 })
	time.Sleep(100 * time.Millisecond)
	if n := countLogs(logs, zap.WarnLevel, "appendfsync"); n != 1 {
		t.Fatalf("%d persistence WARNs after 20 claims, want 1", n)
	}

	durable := startRedis(t, redistest.Durable...)
	pool, logs = newTestRedisPool(t, durable.Addr)
	if _, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: "evt", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the persistence INFO", 10*time.Second, func() bool { return countLogs(logs, zap.InfoLevel, "writes every event to disk") == 1 })
	if n := len(logs.FilterLevelExact(zap.WarnLevel).All()); n != 0 {
		t.Fatalf("%d WARNs on a durable Redis: %v", n, logs.All())
	}
}

// While Redis is down every call fails at once with errRedisDown (a 503 with its reason), the
// outage is logged once as it begins and once as it ends, and the pool works again by itself.
func TestRedisOutageLoggedOncePerChange(t *testing.T) {
	srv := startRedis(t, redistest.Durable...)
	pool, logs := newTestRedisPool(t, srv.Addr)
	ctx := context.Background()
	claim := func(id string) error {
		_, err := pool.Claim(ctx, dedupe.Claim{Namespace: "r", ID: id, Lease: time.Minute})
		return err
	}
	if err := claim("evt_before"); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	for i := range 50 {
		began := time.Now()
		err := claim(fmt.Sprintf("evt_down_%d", i))
		if !errors.Is(err, errRedisDown) {
			t.Fatalf("claim with Redis down: %v, want errRedisDown", err)
		}
		if took := time.Since(began); took > defaultRedisReadTimeout {
			t.Fatalf("a claim with Redis down took %v, longer than the read timeout %v", took, defaultRedisReadTimeout)
		}
	}
	if _, err := pool.Lease(ctx, "r", time.Now(), 10, time.Minute); !errors.Is(err, errRedisDown) {
		t.Fatalf("lease with Redis down: %v, want errRedisDown", err)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "claims to work again", 10*time.Second, func() bool { return claim(fmt.Sprintf("evt_up_%d", time.Now().UnixNano())) == nil })
	for i := range 10 {
		if err := claim(fmt.Sprintf("evt_after_%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if down, up := countLogs(logs, zap.ErrorLevel, "is unavailable"), countLogs(logs, zap.InfoLevel, "is back"); down != 1 || up != 1 {
		t.Fatalf("%d ERROR and %d INFO lines for one outage, want 1 and 1: %v", down, up, logs.All())
	}
}
