package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
)

// Store is a dedupe.Ledger and dedupe.Outbox kept in Redis, shared by every gateway node that
// uses the same server (or Sentinel group, or Cluster) and prefix. Each operation is one round
// trip, most of them one Lua script, so it is atomic across nodes; a write has been answered
// by Redis when the call returns (how durable that is depends on the server's persistence, see
// CheckPersistence).
type Store struct {
	client redis.UniversalClient
	// perRequest runs the scripts each webhook request or delivery waits for (Claim, Done,
	// Release, Accept, DoneAndQueue, Lease, Update): the client's auto-pipeliner where it has
	// one, which sends the scripts of concurrent requests together, so Redis reads, runs and
	// fsyncs them as one batch (BENCHMARKS.md: Redis's CPU per sync request 147 → 61 µs); else
	// the client.
	perRequest redis.Scripter
	// escapedPrefix is the prefix as it appears in keys (see tag).
	escapedPrefix string
	// gone is told of the queue entries of gone events each Lease dropped (OnGoneEvents).
	gone func(namespace string, n int)
}

// New returns a store over client; prefix "" means "hookgate". The store owns the client: Close
// closes it.
func New(client redis.UniversalClient, prefix string) *Store {
	if prefix == "" {
		prefix = "hookgate"
	}
	return &Store{client: client, perRequest: autoPipelined(client), escapedPrefix: escape(prefix, ":{}")}
}

// OnGoneEvents sets fn to be told, once per Lease call that dropped any, how many queue entries
// of events whose hash is gone from Redis (evicted, deleted, lost in a failover) it dropped: those
// events are lost, and an operator should hear of it. Set it before the store is used.
func (s *Store) OnGoneEvents(fn func(namespace string, n int)) { s.gone = fn }

// autoPipelined is client's auto-pipeliner (single server, Sentinel or Cluster client), or
// client itself when it has none. Closing the client closes it.
//
// Redis with appendfsync always fsyncs its AOF once per turn of its event loop, and in a turn
// reads at most 16 KiB from each connection: one connection's deep batch of Accepts (2 KiB each
// with a 1 KiB body) costs an fsync per 16 KiB, one after another, while the callers behind
// it wait. So the pipeliner cuts batches at pipelineBatchBytes and runs up to pipelineBatches
// of them at once, each on its own connection: Redis reads them all in one turn and syncs them
// with one fsync. The batches are unordered among themselves, which no caller notices: each
// waits for its own command's reply before it sends another.
func autoPipelined(client redis.UniversalClient) redis.Scripter {
	c, ok := client.(interface {
		AutoPipelineWithOptions(*redis.AutoPipelineOptions) (*redis.AutoPipeliner, error)
	})
	if !ok {
		return client
	}
	o := redis.DefaultBlockingAutoPipelineOptions()
	o.MaxConcurrentBatches, o.Unordered, o.MaxBatchBytes = pipelineBatches, true, pipelineBatchBytes
	ap, err := c.AutoPipelineWithOptions(o)
	if err != nil {
		return client
	}
	return ap
}

// The auto-pipeliner's batches (see autoPipelined): at most pipelineBatches at once (within
// go-redis's default pipeline pool of 10 connections), each cut once it holds about
// pipelineBatchBytes (as go-redis estimates it, a little above the bytes sent).
const (
	pipelineBatches    = 8
	pipelineBatchBytes = 16 << 10
)

// Close implements dedupe.Ledger: it closes the client.
func (s *Store) Close() error {
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}

var errNamespaceNUL = errors.New("namespace contains a NUL byte")

// tag is the key prefix of every key of namespace: "{PREFIX:NAMESPACE}:", whose braces make it
// the Cluster hash tag. The prefix is escaped of ':', '{', '}' and '%', the namespace of '{',
// '}' and '%' (as %XX), so that the tag is exactly the part in braces and a key names its
// namespace unambiguously.
func (s *Store) tag(namespace string) (string, error) {
	if strings.IndexByte(namespace, 0) >= 0 {
		return "", fmt.Errorf("%w: %q", errNamespaceNUL, namespace)
	}
	return "{" + s.escapedPrefix + ":" + escape(namespace, "{}") + "}:", nil
}

// queue is the key prefixes of a queue (its namespace as dedupe.QueueNamespace makes it): the tag
// t of its route, which its route-level keys start with (dedupe records, accepted versions, the
// shared bodies of events queued for several destinations), and the prefix q of the queue's own
// keys (its events' deliveries, due queue, listings, entity holders, delivered versions, rate):
// t itself for the route's default destination, so its keys are the route's as they were before
// routes had several destinations, else t + "@" + the destination's name + ":" (queuePrefix).
// Every key of a route's queues is so in the route's hash slot.
func (s *Store) queue(namespace string) (t, q string, err error) {
	route, destination := dedupe.SplitQueueNamespace(namespace)
	if t, err = s.tag(route); err != nil {
		return "", "", err
	}
	if destination == dedupe.DefaultDestination {
		if route != namespace {
			return "", "", fmt.Errorf("queue namespace %q: the default destination's queue is the route's own namespace %q", namespace, route)
		}
		return t, t, nil
	}
	if err := dedupe.CheckDestinationName(destination); err != nil {
		return "", "", fmt.Errorf("queue namespace %q: %w", namespace, err)
	}
	return t, t + queuePrefix(destination), nil
}

// queuePrefix is what a destination's queue keys have after the route's tag: "" for the default
// destination, else "@", its name and ":". A name (dedupe.CheckDestinationName) is letters,
// digits, '-' and '_', which need no escaping; no route-level key starts with '@'.
func queuePrefix(destination string) string {
	if destination == dedupe.DefaultDestination {
		return ""
	}
	return "@" + destination + ":"
}

// scriptKeys are the keys a script of the namespace tagged t declares: t itself first, which
// the scripts read as T (lua/common.lua) and which is never a key, then t+suffix for every key
// the script knows before it runs. A queue's script gives its queue's prefix q (Store.queue) as
// t, which the scripts read as Q, and find their route's tag T in (its start, up to the first
// "}:"). While Redis Cluster moves the namespace's slot, a script
// declaring keys of which one (t) is missing is answered TRYAGAIN, on the old node and the new
// one alike, which go-redis retries; so no script runs against the half of the keys one node
// holds. Declared keys that do not exist yet (a new event's) are nothing special otherwise.
func scriptKeys(t string, suffixes ...string) []string {
	keys := make([]string, 0, 1+len(suffixes))
	keys = append(keys, t)
	for _, s := range suffixes {
		keys = append(keys, t+s)
	}
	return keys
}

// escape writes each byte of s found in special, and '%', as %XX.
func escape(s, special string) string {
	if !strings.ContainsAny(s, special) && strings.IndexByte(s, '%') < 0 {
		return s
	}
	special += "%"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(special, s[i]) >= 0 {
			fmt.Fprintf(&b, "%%%02X", s[i])
		} else {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// unescape is escape's inverse.
func unescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if c, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(c))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var (
	_ dedupe.Ledger       = (*Store)(nil)
	_ dedupe.Outbox       = (*Store)(nil)
	_ dedupe.StartLimiter = (*Store)(nil)
)
