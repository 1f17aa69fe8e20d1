package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// CheckPersistence reads appendonly/appendfsync, no-appendfsync-on-rewrite and maxmemory-policy
// (CONFIG GET) on every master. warning is "" when every master has appendonly yes + appendfsync
// always, fsyncs during rewrites too and never evicts keys; else plain sentences saying what can
// be lost (everysec: the last second of acknowledged events on a crash; no AOF: everything since
// the last RDB save on a restart; no fsync during rewrites: what was acknowledged during one, on a
// crash of the machine; an evicting policy: whatever it evicts once memory is full, queued events
// included). err when the settings cannot be read (CONFIG refused by an ACL or a managed service).
func (s *Store) CheckPersistence(ctx context.Context) (warning string, err error) {
	var mu sync.Mutex
	weakest := durable
	var where, rewriting, evicting []string
	err = s.forEachMaster(ctx, func(ctx context.Context, node redis.UniversalClient) error {
		p, err := readPersistence(ctx, node)
		if err != nil {
			return err
		}
		skips := false
		if p >= everySecond {
			if skips, err = skipsFsyncOnRewrite(ctx, node); err != nil {
				return err
			}
		}
		policy, err := readEvictionPolicy(ctx, node)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if p < durable {
			where = append(where, addrOf(node))
		}
		if skips {
			rewriting = append(rewriting, addrOf(node))
		}
		if policy != "noeviction" {
			evicting = append(evicting, addrOf(node)+": "+policy)
		}
		weakest = min(weakest, p)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("redisstore: reading the persistence settings (CONFIG GET appendonly appendfsync no-appendfsync-on-rewrite maxmemory-policy): %w", err)
	}
	// The same settings make the same sentences, whatever order the masters answered in: the
	// caller logs a change of them.
	slices.Sort(where)
	slices.Sort(rewriting)
	slices.Sort(evicting)
	var warnings []string
	if len(where) > 0 {
		warnings = append(warnings, persistenceWarning(where, weakest))
	}
	if len(rewriting) > 0 {
		warnings = append(warnings, "Redis ("+strings.Join(rewriting, ", ")+") does not fsync its append-only file while it rewrites it (no-appendfsync-on-rewrite yes): "+
			"a crash of its machine during a rewrite loses the events acknowledged since the rewrite began (up to about 30 seconds of them, what the OS had not yet written); set no-appendfsync-on-rewrite no")
	}
	if len(evicting) > 0 {
		warnings = append(warnings, "Redis ("+strings.Join(evicting, ", ")+") evicts keys when it reaches maxmemory: "+
			"an evicted key is an acknowledged event never delivered, or a dedupe record or version forgotten early; set maxmemory-policy noeviction, so a full Redis refuses new events (503) instead")
	}
	return strings.Join(warnings, "; "), nil
}

// persistenceWarning says what the weakest of the masters at where loses.
func persistenceWarning(where []string, weakest persistence) string {
	servers := "Redis (" + strings.Join(where, ", ") + ")"
	switch weakest {
	case noAOF:
		return servers + " runs without the append-only file (appendonly no): a restart loses every event acknowledged since its last RDB snapshot, and without snapshots all of them; set appendonly yes and appendfsync always to lose nothing acknowledged"
	case noFsync:
		return servers + " leaves syncing the append-only file to the OS (appendfsync no): a crash of its machine loses the events acknowledged in the last ~30 seconds; set appendfsync always to lose nothing acknowledged"
	default:
		return servers + " syncs its append-only file once a second (appendfsync everysec): a crash loses the events acknowledged in the last second; set appendfsync always to lose nothing acknowledged"
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

// skipsFsyncOnRewrite reports whether the server skips fsync while a rewrite of its append-only
// file (or an RDB save) runs: no-appendfsync-on-rewrite yes, which appendfsync always obeys too.
func skipsFsyncOnRewrite(ctx context.Context, node redis.UniversalClient) (bool, error) {
	conf, err := node.ConfigGet(ctx, "no-appendfsync-on-rewrite").Result()
	if err != nil {
		return false, err
	}
	v := conf["no-appendfsync-on-rewrite"]
	if v == "" {
		return false, fmt.Errorf("the server did not report no-appendfsync-on-rewrite")
	}
	return v == "yes", nil
}

// readEvictionPolicy is the server's maxmemory-policy.
func readEvictionPolicy(ctx context.Context, node redis.UniversalClient) (string, error) {
	conf, err := node.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", err
	}
	policy := conf["maxmemory-policy"]
	if policy == "" {
		return "", fmt.Errorf("the server did not report maxmemory-policy")
	}
	return policy, nil
}

// addrOf names a server in a warning.
func addrOf(node redis.UniversalClient) string {
	if c, ok := node.(*redis.Client); ok {
		return c.Options().Addr
	}
	return "the server"
}
