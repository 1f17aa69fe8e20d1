package redisstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
)

// commandCounter counts the commands a client sends, pipelines by their commands.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// The hot path is one round trip per request: each operation sends one command (a script's
// EVALSHA once the server knows the script).
func TestEachOperationIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: server.Addr})
	counter := &commandCounter{}
	client.AddHook(counter)
	s := New(client, newPrefix())
	t.Cleanup(func() { s.Close() })
	for _, sc := range []interface {
		Load(context.Context, redis.Scripter) *redis.StringCmd
	}{claimScript, doneScript, releaseScript, acceptScript, leaseScript, updateScript, replayScript, listScript} {
		if err := sc.Load(ctx, client).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The auto-pipeliner's connection sends its handshake (HELLO, CLIENT SETINFO) once, on first use.
	if err := s.Release(ctx, claim("warm-up")); err != nil {
		t.Fatal(err)
	}
	c := versioned("sync", "cus_1", 1)
	a := versioned("async", "cus_2", 1)
	var leased *dedupe.Event
	ops := []struct {
		name string
		run  func() error
	}{
		{"Claim", func() error { _, err := s.Claim(ctx, c); return err }},
		{"Done", func() error { return s.Done(ctx, c, time.Hour) }},
		{"Release", func() error { return s.Release(ctx, claim("other")) }},
		{"Accept", func() error {
			ev := queued("async", base)
			ev.Entity, ev.Version = "cus_2", 1
			_, err := s.Accept(ctx, a, ev, time.Hour)
			return err
		}},
		{"Lease", func() error { evs, err := s.Lease(ctx, ns, base, 10, time.Minute); leased = evs[0]; return err }},
		{"Update", func() error { leased.State = dedupe.Dead; return s.Update(ctx, leased, time.Hour) }},
		{"Replay", func() error { return s.Replay(ctx, ns, "async", base) }},
		{"Get", func() error { _, err := s.Get(ctx, ns, "async"); return err }},
		{"List", func() error { _, err := s.List(ctx, ns, dedupe.Pending, dedupe.Cursor{}, 10); return err }},
		{"DeliveredVersion", func() error { _, _, err := s.DeliveredVersion(ctx, ns, "cus_2"); return err }},
		{"Pending", func() error { _, err := s.Pending(ctx, ns); return err }},
	}
	for _, op := range ops {
		before := counter.n.Load()
		if err := op.run(); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		if n := counter.n.Load() - before; n != 1 {
			t.Errorf("%s sent %d commands, want 1", op.name, n)
		}
	}
}
