package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
)

// pendingSuffix ends the key of a namespace's Pending listing.
const pendingSuffix = "s:" + string(dedupe.Pending)

// PendingByNamespace counts the Pending events of every namespace of this prefix that has any,
// so that a caller can tell an operator about events no route will deliver. It scans every
// master (each Cluster master in turn) for the namespaces' Pending listings, so its cost grows
// with the number of keys on the server: it is meant for startup and the admin API, not for
// each request.
func (s *Store) PendingByNamespace(ctx context.Context) (map[string]int, error) {
	var mu sync.Mutex
	counts := map[string]int{}
	err := s.forEachMaster(ctx, func(ctx context.Context, node redis.UniversalClient) error {
		found, err := s.pendingOn(ctx, node)
		mu.Lock()
		defer mu.Unlock()
		for ns, n := range found {
			counts[ns] += n
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: pending by namespace: %w", err)
	}
	return counts, nil
}

// pendingOn counts the Pending events per namespace on one server.
func (s *Store) pendingOn(ctx context.Context, node redis.UniversalClient) (map[string]int, error) {
	pattern := globEscape("{"+s.escapedPrefix+":") + "*" + globEscape("}:"+pendingSuffix)
	counts := map[string]int{}
	iter := node.ScanType(ctx, 0, pattern, 1000, "zset").Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		ns, ok := s.namespaceOf(key, pendingSuffix)
		if !ok {
			continue // an event ID that happens to match the pattern
		}
		n, err := node.ZCard(ctx, key).Result()
		if err != nil {
			return counts, err
		}
		if n > 0 {
			counts[ns] = int(n)
		}
	}
	return counts, iter.Err()
}

// forEachMaster runs fn against every master of a Cluster, or against the client itself when it
// is a single server (or a Sentinel group's master).
func (s *Store) forEachMaster(ctx context.Context, fn func(context.Context, redis.UniversalClient) error) error {
	if cluster, ok := s.client.(*redis.ClusterClient); ok {
		return cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return fn(ctx, node)
		})
	}
	return fn(ctx, s.client)
}

// globEscape escapes the characters special to SCAN's MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
