package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

func TestCheckPersistence(t *testing.T) {
	t.Parallel()
	if warning, err := newStore(t).CheckPersistence(ctx); warning != "" || err != nil {
		t.Fatalf("appendonly yes, appendfsync always: %q %v, want no warning", warning, err)
	}
	srv := redistest.Run(t, "appendonly yes", "appendfsync everysec")
	s := storeAt(t, srv.Addr, "")
	warning, err := s.CheckPersistence(ctx)
	if err != nil || !strings.Contains(warning, "last second") || !strings.Contains(warning, srv.Addr) {
		t.Fatalf("appendfsync everysec: %q %v, want a warning about the last second", warning, err)
	}
	if _, err := srv.Command("config", "set", "appendonly", "no"); err != nil {
		t.Fatal(err)
	}
	warning, err = s.CheckPersistence(ctx)
	if err != nil || !strings.Contains(warning, "restart loses") {
		t.Fatalf("appendonly no: %q %v, want a warning about restarts", warning, err)
	}
	// A user whose ACL refuses CONFIG cannot read the settings: an error, not a guess.
	if _, err := srv.Command("acl", "setuser", "app", "on", ">secret", "~*", "+@all", "-config"); err != nil {
		t.Fatal(err)
	}
	limited := New(redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "app", Password: "secret"}), "")
	defer limited.Close()
	if warning, err := limited.CheckPersistence(ctx); err == nil {
		t.Fatalf("CONFIG refused by the ACL: warning %q and no error", warning)
	}
}

// appendfsync always does not fsync while the append-only file is rewritten when
// no-appendfsync-on-rewrite is yes: what was acknowledged meanwhile is only in the OS's cache.
func TestCheckPersistenceWarnsOfNoFsyncDuringRewrites(t *testing.T) {
	t.Parallel()
	srv := redistest.Run(t, append(redistest.Durable, "no-appendfsync-on-rewrite yes")...)
	s := storeAt(t, srv.Addr, "")
	warning, err := s.CheckPersistence(ctx)
	if err != nil || !strings.Contains(warning, "no-appendfsync-on-rewrite") || !strings.Contains(warning, srv.Addr) {
		t.Fatalf("appendfsync always, no-appendfsync-on-rewrite yes: %q %v, want a warning naming the setting", warning, err)
	}
	if _, err := srv.Command("config", "set", "no-appendfsync-on-rewrite", "no"); err != nil {
		t.Fatal(err)
	}
	if warning, err := s.CheckPersistence(ctx); warning != "" || err != nil {
		t.Fatalf("no-appendfsync-on-rewrite no: %q %v, want no warning", warning, err)
	}
}

// With Redis down every call fails (the caller answers 503) and none claims success; once it is
// back the store works again, with what it acknowledged before.
func TestRedisDownFailsThenRecovers(t *testing.T) {
	t.Parallel()
	srv := redistest.Run(t, redistest.Durable...)
	s := New(redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond}), "")
	t.Cleanup(func() { s.Close() })
	expect(t, "accept", accept(t, s, claim("before"), base), dedupe.Claimed)
	srv.Kill()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if out, err := s.Accept(short, claim("during"), queued("during", base), time.Hour); err == nil {
		t.Fatalf("Accept with Redis down: %v and no error", out)
	}
	if _, err := s.Claim(short, claim("during")); err == nil {
		t.Fatal("Claim with Redis down: no error")
	}
	if _, err := s.Lease(short, ns, base, 1, time.Minute); err == nil {
		t.Fatal("Lease with Redis down: no error")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// The restarted server has no scripts cached: EVALSHA falls back to EVAL.
	expect(t, "accept after the restart", accept(t, s, claim("after"), base), dedupe.Claimed)
	expect(t, "accept of an event acknowledged before the crash", accept(t, s, claim("before"), base), dedupe.Duplicate)
	if got := lease(t, s, base, 10); len(got) != 2 {
		t.Fatalf("leased after the restart: %v, want both events", ids(got))
	}
}

func TestNamespacesOnAClusterEachOnOneShard(t *testing.T) {
	t.Parallel()
	cluster := redistest.DurableCluster(t)
	newNode := func() *Store {
		s := New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()}), "")
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := newNode(), newNode()
	// Namespaces whose tags hash to different slots, so the shards all take part.
	namespaces := []string{"stripe", "github", "shopify", "slack", "twilio", "paypal"}
	slots := map[int64]bool{}
	for _, namespace := range namespaces {
		tag, _ := a.tag(namespace)
		slot, err := a.client.(*redis.ClusterClient).ClusterKeySlot(ctx, tag+"e:x").Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot/5462] = true // 3 masters split 16384 slots in thirds
	}
	if len(slots) < 2 {
		t.Fatalf("the namespaces all hash to one master's slots")
	}
	for _, namespace := range namespaces {
		c := versioned("evt", "cus", 2)
		c.Namespace = namespace
		ev := queued("evt", base)
		ev.Namespace, ev.Entity, ev.Version = namespace, "cus", 2
		if out, err := a.Claim(ctx, c); err != nil || out != dedupe.Claimed {
			t.Fatalf("%s: Claim: %v %v", namespace, out, err)
		}
		if out, err := b.Accept(ctx, c, ev, time.Hour); err != nil || out != dedupe.InFlight {
			t.Fatalf("%s: Accept while claimed on the other node: %v %v", namespace, out, err)
		}
		if err := a.Release(ctx, c); err != nil {
			t.Fatal(err)
		}
		if out, err := b.Accept(ctx, c, ev, time.Hour); err != nil || out != dedupe.Claimed {
			t.Fatalf("%s: Accept: %v %v", namespace, out, err)
		}
		old := c
		old.ID, old.Version = "old", 1
		oldEv := queued("old", base)
		oldEv.Namespace = namespace
		if out, err := a.Accept(ctx, old, oldEv, time.Hour); err != nil || out != dedupe.Stale {
			t.Fatalf("%s: stale Accept on the other node: %v %v", namespace, out, err)
		}
		evs, err := a.Lease(ctx, namespace, base, 10, time.Minute)
		if err != nil || len(evs) != 1 {
			t.Fatalf("%s: Lease: %v %v", namespace, evs, err)
		}
		evs[0].State = dedupe.Dead
		if err := b.Update(ctx, evs[0], time.Hour); err != nil {
			t.Fatalf("%s: Update: %v", namespace, err)
		}
		if page, err := b.List(ctx, namespace, dedupe.Dead, dedupe.Cursor{}, 10); err != nil || len(page) != 1 {
			t.Fatalf("%s: List: %v %v", namespace, page, err)
		}
		if err := a.Replay(ctx, namespace, "evt", base); err != nil {
			t.Fatalf("%s: Replay: %v", namespace, err)
		}
		if _, err := b.Get(ctx, namespace, "evt"); err != nil {
			t.Fatalf("%s: Get: %v", namespace, err)
		}
		if wait, err := a.TakeStart(ctx, namespace, time.Minute, 0); err != nil || wait != 0 {
			t.Fatalf("%s: TakeStart: wait %v, %v; want the start taken", namespace, wait, err)
		}
		if wait, err := b.TakeStart(ctx, namespace, time.Minute, 0); err != nil || wait <= 0 {
			t.Fatalf("%s: TakeStart on the other node right after: wait %v, %v; want a wait", namespace, wait, err)
		}
	}
	counts, err := a.PendingByNamespace(ctx)
	if err != nil || len(counts) != len(namespaces) {
		t.Fatalf("PendingByNamespace over the masters: %v %v", counts, err)
	}
	if warning, err := a.CheckPersistence(ctx); warning != "" || err != nil {
		t.Fatalf("CheckPersistence over durable masters: %q %v", warning, err)
	}
}
