package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CheckPersistence reads appendonly/appendfsync (CONFIG GET) on every master. warning is "" when
// every master has appendonly yes + appendfsync always; else a plain sentence saying what can be
// lost (everysec: the last second of acknowledged events on a crash; no AOF: everything since the
// last RDB save on a restart). err when the settings cannot be read (CONFIG refused by an ACL or
// a managed service).
func (s *Store) CheckPersistence(ctx context.Context) (warning string, err error) {
	var mu sync.Mutex
	weakest := durable
	var where []string
	err = s.forEachMaster(ctx, func(ctx context.Context, node redis.UniversalClient) error {
		p, err := readPersistence(ctx, node)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if p < durable {
			where = append(where, addrOf(node))
		}
		weakest = min(weakest, p)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("redisstore: reading the persistence settings (CONFIG GET appendonly appendfsync): %w", err)
	}
	if len(where) == 0 {
		return "", nil
	}
	servers := "Redis (" + strings.Join(where, ", ") + ")"
	switch weakest {
	case noAOF:
		return servers + " runs without the append-only file (appendonly no): a restart loses every event acknowledged since its last RDB snapshot, and without snapshots all of them; set appendonly yes and appendfsync always to lose nothing acknowledged", nil
	case noFsync:
		return servers + " leaves syncing the append-only file to the OS (appendfsync no): a crash of its machine loses the events acknowledged in the last ~30 seconds; set appendfsync always to lose nothing acknowledged", nil
	default:
		return servers + " syncs its append-only file once a second (appendfsync everysec): a crash loses the events acknowledged in the last second; set appendfsync always to lose nothing acknowledged", nil
	}
}

// persistence is how much of what a server acknowledged survives a crash, weakest first.
type persistence int

const (
	noAOF persistence = iota
	noFsync
	everySecond
	durable
)

func readPersistence(ctx context.Context, node redis.UniversalClient) (persistence, error) {
	conf, err := node.ConfigGet(ctx, "append*").Result()
	if err != nil {
		return 0, err
	}
	aof, fsync := conf["appendonly"], conf["appendfsync"]
	if aof == "" || fsync == "" {
		return 0, fmt.Errorf("the server did not report appendonly and appendfsync")
	}
	switch {
	case aof != "yes":
		return noAOF, nil
	case fsync == "always":
		return durable, nil
	case fsync == "everysec":
		return everySecond, nil
	}
	return noFsync, nil
}

// addrOf names a server in a warning.
func addrOf(node redis.UniversalClient) string {
	if c, ok := node.(*redis.Client); ok {
		return c.Options().Addr
	}
	return "the server"
}
