package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
)

// pendingSuffix ends the key of a queue's Pending listing.
const pendingSuffix = "s:" + string(dedupe.Pending)

// PendingByNamespace counts the Pending events of every queue of this prefix that has any, by
// the queue's namespace (dedupe.QueueNamespace: a route's own for its default destination, the
// route, a NUL, '@' and the name for a named one), so that a caller can tell an operator about
// events no route will deliver. It scans every master (each Cluster master in turn) for the
// queues' Pending listings, so its cost grows with the number of keys on the server: it is
// meant for startup and the admin API, not for each request.
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

// pendingOn counts the Pending events per queue namespace on one server.
func (s *Store) pendingOn(ctx context.Context, node redis.UniversalClient) (map[string]int, error) {
	// Both "T s:pending" and "T @<destination>:s:pending".
	pattern := globEscape("{"+s.escapedPrefix+":") + "*" + globEscape("}:") + "*" + globEscape(pendingSuffix)
	counts := map[string]int{}
	iter := node.ScanType(ctx, 0, pattern, 1000, "zset").Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		ns, ok := s.queueOf(key, pendingSuffix)
		if !ok {
			continue // an event ID or entity that happens to match the pattern
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

// queueOf is the queue namespace of a key of a queue (Store.queue) that ends in suffix, and
// whether it is one.
func (s *Store) queueOf(key, suffix string) (string, bool) {
	head := "{" + s.escapedPrefix + ":"
	if !strings.HasPrefix(key, head) || !strings.HasSuffix(key, suffix) {
		return "", false
	}
	route, rest, ok := strings.Cut(key[len(head):len(key)-len(suffix)], "}:")
	if !ok || strings.Contains(route, "{") {
		return "", false
	}
	route = unescape(route)
	if rest == "" {
		return route, true
	}
	destination, ok := strings.CutPrefix(rest, "@")
	if !ok {
		return "", false
	}
	if destination, ok = strings.CutSuffix(destination, ":"); !ok || destination == dedupe.DefaultDestination ||
		dedupe.CheckDestinationName(destination) != nil {
		return "", false
	}
	return dedupe.QueueNamespace(route, destination), true
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
