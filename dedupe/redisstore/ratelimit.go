package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// TakeStart implements dedupe.StartLimiter in one script over one key of the queue of namespace
// (dedupe.QueueNamespace: each destination of a route has its own rate), in its route's hash
// slot (so on the same Cluster shard as its queue), timed by Redis's clock: every node sharing
// the store takes its starts from it, so the queue's rate bounds them all together.
func (s *Store) TakeStart(ctx context.Context, namespace string, interval, ahead time.Duration) (time.Duration, error) {
	if interval < time.Microsecond {
		return 0, fmt.Errorf("redisstore: take start: interval must be at least 1µs, got %v", interval)
	}
	_, q, err := s.queue(namespace)
	if err != nil {
		return 0, fmt.Errorf("redisstore: take start: %w", err)
	}
	wait, err := startScript.Run(ctx, s.perRequest, scriptKeys(q, "r"), strconv.FormatInt(interval.Microseconds(), 10), strconv.FormatInt(ahead.Microseconds(), 10)).Int64()
	if err != nil {
		return 0, fmt.Errorf("redisstore: take start of %q: %w", namespace, err)
	}
	return time.Duration(wait) * time.Microsecond, nil
}
