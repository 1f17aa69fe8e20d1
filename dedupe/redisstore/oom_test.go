package redisstore

import (
	"bytes"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// fullServer starts a redis-server of its own with a small maxmemory and the given policy,
// stopped when the test ends.
func fullServer(t *testing.T, policy string) *redistest.Server {
	t.Helper()
	srv, err := redistest.Start(filepath.Join(t.TempDir(), "redis"),
		append([]string{"maxmemory 4mb", "maxmemory-policy " + policy}, redistest.Durable...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// fill accepts events of 8 KiB until Redis refuses one for want of memory, and returns the IDs
// it acknowledged.
func fill(t *testing.T, s *Store, entity bool) []string {
	t.Helper()
	var acked []string
	body := bytes.Repeat([]byte("x"), 8<<10)
	for i := 0; i < 2000; i++ {
		id := "ev" + strconv.Itoa(i)
		c := claim(id)
		ev := queued(id, base)
		ev.Body = body
		if entity {
			c.Entity, c.Version = "ent"+strconv.Itoa(i), 1
			ev.Entity, ev.Version = c.Entity, 1
		}
		out, err := s.Accept(ctx, c, ev, time.Hour)
		if err != nil {
			if !strings.Contains(err.Error(), "OOM") {
				t.Fatalf("Accept %d: %v", i, err)
			}
			return acked
		}
		if out != dedupe.Claimed {
			t.Fatalf("Accept %d: %v", i, out)
		}
		acked = append(acked, id)
	}
	t.Fatal("Redis never ran out of memory")
	return nil
}

// With maxmemory reached under noeviction, Redis refuses new events (503 to the provider, as it
// should), but the deliverer must still be able to lease the backlog and record deliveries,
// which is what frees the memory: otherwise nothing is delivered and nothing accepted again,
// for good (the deliverer re-sends the same events after each lease, and never records them).
func TestFullMemoryStillDrains(t *testing.T) {
	t.Parallel()
	for _, entity := range []bool{false, true} {
		name := "no entity"
		if entity {
			name = "entity"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := fullServer(t, "noeviction")
			s := storeAt(t, srv.Addr, "hookgate")
			acked := fill(t, s, entity)
			t.Logf("%d events acknowledged before Redis was full", len(acked))
			evs, err := s.Lease(ctx, ns, base.Add(time.Minute), 4, time.Minute)
			if err != nil {
				t.Fatalf("Lease with Redis at maxmemory (the only way to drain it): %v", err)
			}
			if len(evs) == 0 {
				t.Fatal("Lease with Redis at maxmemory handed out nothing")
			}
			evs[0].State, evs[0].Attempts = dedupe.Delivered, 1
			if err := s.Update(ctx, evs[0], time.Hour); err != nil {
				t.Fatalf("recording a delivery with Redis at maxmemory (it frees the body): %v", err)
			}
		})
	}
}

// A server that may evict keys (any maxmemory-policy but noeviction) drops acknowledged events,
// dedupe records and versions without a word: CheckPersistence must say so, as it does for a
// missing fsync.
func TestEvictionPolicyWarned(t *testing.T) {
	t.Parallel()
	srv := fullServer(t, "allkeys-lru")
	s := storeAt(t, srv.Addr, "hookgate")
	warning, err := s.CheckPersistence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	acked := fill2(t, s)
	lost := 0
	for _, id := range acked {
		if _, err := s.Get(ctx, ns, id); errors.Is(err, dedupe.ErrNotFound) {
			lost++
		}
	}
	pending, _ := s.Pending(ctx, ns)
	t.Logf("allkeys-lru: %d events acknowledged, %d of them gone from Redis, Pending says %d", len(acked), lost, pending)
	if warning == "" {
		t.Fatalf("CheckPersistence said nothing about maxmemory-policy allkeys-lru, which lost %d of %d acknowledged events", lost, len(acked))
	}
}

// fill2 accepts 1000 events of 8 KiB (some 8 MB, twice maxmemory) and returns those acknowledged.
func fill2(t *testing.T, s *Store) []string {
	t.Helper()
	var acked []string
	body := bytes.Repeat([]byte("x"), 8<<10)
	for i := 0; i < 1000; i++ {
		id := "ev" + strconv.Itoa(i)
		ev := queued(id, base)
		ev.Body = body
		out, err := s.Accept(ctx, claim(id), ev, time.Hour)
		if err == nil && out == dedupe.Claimed {
			acked = append(acked, id)
		}
	}
	return acked
}
