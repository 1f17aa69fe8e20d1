package caddymodule

import (
	"context"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

func TestZZDebugRestart(t *testing.T) {
	srv := startRedis(t, redistest.Durable...)
	pool, _ := newTestRedisPool(t, srv.Addr)
	ctx := context.Background()
	ev := &dedupe.Event{ID: "e1", Method: "POST", URI: "/", Body: []byte("{}"), AcceptedAt: time.Now()}
	if _, err := pool.Accept(ctx, dedupe.Claim{Namespace: "r", ID: "e1"}, ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	leased, err := pool.Lease(ctx, "r", time.Now(), 1, time.Minute)
	t.Logf("leased %d %v", len(leased), err)
	l := leased[0]
	l.Attempts, l.NextAttempt, l.LastStatus = 1, time.Now().Add(50*time.Millisecond), 503
	t.Logf("update: %v", pool.Update(ctx, l, 24*time.Hour))
	got, err := pool.Get(ctx, "r", "e1")
	t.Logf("before: %v %v", got != nil, err)
	out, _ := srv.Command("keys", "*")
	t.Logf("keys: %s", out)
	srv.Stop()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	out, _ = srv.Command("keys", "*")
	t.Logf("keys after: %s", out)
	for i := 0; i < 5; i++ {
		got, err = pool.Get(ctx, "r", "e1")
		t.Logf("after: %v %v", got != nil, err)
		time.Sleep(200 * time.Millisecond)
	}
}
