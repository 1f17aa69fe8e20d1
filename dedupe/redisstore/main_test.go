package redisstore

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/paralleltest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// server is the redis-server every test of the package shares, with appendfsync always; each
// test keeps to its own key prefix.
var server *redistest.Server

func TestMain(m *testing.M) {
	// The tests wait on Redis, on TTLs and on servers starting far more than they compute.
	paralleltest.Default(8)
	dir, err := os.MkdirTemp("", "redisstore-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server, err = redistest.Start(filepath.Join(dir, "redis"), redistest.Durable...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	server.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

var prefixes atomic.Int64

// newPrefix is a key prefix no other test uses.
func newPrefix() string { return fmt.Sprintf("test%d", prefixes.Add(1)) }

// storeAt is a store over its own client to addr, closed when the test ends.
func storeAt(t *testing.T, addr, prefix string) *Store {
	t.Helper()
	s := New(redis.NewClient(&redis.Options{Addr: addr}), prefix)
	t.Cleanup(func() { s.Close() })
	return s
}

// twoNodes are two stores sharing one prefix over two clients: two gateway nodes.
func twoNodes(t *testing.T) (*Store, *Store) {
	prefix := newPrefix()
	return storeAt(t, server.Addr, prefix), storeAt(t, server.Addr, prefix)
}

func newStore(t *testing.T) *Store { return storeAt(t, server.Addr, newPrefix()) }

// base is an arbitrary fixed time the tests lease at, so due times need no sleeping.
var base = time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)

var ctx = context.Background()

const ns = "route"

func claim(id string) dedupe.Claim {
	return dedupe.Claim{Namespace: ns, ID: id, Lease: time.Minute}
}

func versioned(id, entity string, version int64) dedupe.Claim {
	c := claim(id)
	c.Entity, c.Version = entity, version
	return c
}

// queued is an event as the handler would accept it at at.
func queued(id string, at time.Time) *dedupe.Event {
	return &dedupe.Event{
		Namespace: ns, ID: id, Method: "POST", URI: "/hook?x=1", Scheme: "stripe",
		Header:     http.Header{"Content-Type": {"application/json"}, "X-Raw": {"\xff\xfe not utf-8"}},
		Body:       []byte(`{"id":"` + id + `"}`),
		AcceptedAt: at,
	}
}

// accept accepts queued(c.ID) at at (its entity and version set from c) and returns the outcome.
func accept(t *testing.T, s *Store, c dedupe.Claim, at time.Time) dedupe.Outcome {
	t.Helper()
	ev := queued(c.ID, at)
	ev.Entity, ev.Version = c.Entity, c.Version
	out, err := s.Accept(ctx, c, ev, time.Hour)
	if err != nil {
		t.Fatalf("Accept %q: %v", c.ID, err)
	}
	return out
}

func expect(t *testing.T, what string, got, want dedupe.Outcome) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// lease leases up to n events at now for a minute and returns their IDs.
func lease(t *testing.T, s *Store, now time.Time, n int) []*dedupe.Event {
	t.Helper()
	evs, err := s.Lease(ctx, ns, now, n, time.Minute)
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	return evs
}

func ids(evs []*dedupe.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}
