package redisstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe/ledgertest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// Data written by an earlier build (testdata/queue-fixture.rdb, whose .BUILD says which), loaded
// by a Redis server at its start, keeps its queue: pending events are delivered once, the dead
// letter replays.
func TestDataFromAnEarlierBuildKeepsItsQueue(t *testing.T) {
	rdb, err := os.ReadFile("testdata/queue-fixture.rdb")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dump.rdb"), rdb, 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := redistest.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	ledgertest.CheckQueueFixture(t, New(client, "hookgate"))
}
