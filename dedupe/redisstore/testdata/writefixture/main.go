// Command writefixture writes the Redis data (an RDB file, key prefix "hookgate") that
// redisstore's upgrade test loads:
//
//	go run ./dedupe/redisstore/testdata/writefixture dedupe/redisstore/testdata/queue-fixture.rdb
//
// It starts a redis-server of its own. Run it only with the build whose records the fixture
// stands for, and say which in testdata/queue-fixture.BUILD: later builds must read this one as
// it is.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe/ledgertest"
	"github.com/hookgate/hookgate/dedupe/redisstore"
	"github.com/hookgate/hookgate/internal/redistest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: writefixture FILE.rdb")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "writefixture:", err)
		os.Exit(1)
	}
}

func write(out string) error {
	dir, err := os.MkdirTemp("", "writefixture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := redistest.Start(dir)
	if err != nil {
		return err
	}
	defer srv.Kill()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	if err := ledgertest.WriteQueueFixture(context.Background(), redisstore.New(client, "hookgate"), time.Now()); err != nil {
		return err
	}
	if _, err := srv.Command("save"); err != nil {
		return err
	}
	rdb, err := os.ReadFile(filepath.Join(dir, "dump.rdb"))
	if err != nil {
		return err
	}
	return os.WriteFile(out, rdb, 0o644)
}
