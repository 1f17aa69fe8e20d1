package ledgerpool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/redisstore"
)

// The Redis client's defaults. Redis answers in well under a millisecond on a LAN, so a dial
// or a reply taking seconds means it is down or hung: the provider is then answered 503 within
// about 2 × the read timeout, before its own timeout (Shopify waits 5 s). An fsync of the
// append-only file under load takes tens of milliseconds, far inside it.
const (
	DefaultRedisDialTimeout  = time.Second
	DefaultRedisReadTimeout  = 2 * time.Second
	DefaultRedisWriteTimeout = 2 * time.Second
	// redisMaxRetries is the client's retries of a command after a network error: one covers
	// a pooled connection that a Redis restart closed; more would only delay the 503.
	redisMaxRetries = 1
)

// NewRedisOptions is a Redis client's options with the defaults the pool's outage handling
// relies on; the caller sets where Redis is, who it is, and may change the timeouts.
func NewRedisOptions() *redis.UniversalOptions {
	return &redis.UniversalOptions{
		DialTimeout:  DefaultRedisDialTimeout,
		ReadTimeout:  DefaultRedisReadTimeout,
		WriteTimeout: DefaultRedisWriteTimeout,
		MaxRetries:   redisMaxRetries,
		// Deadlines follow the context, which within bounds (redisbudget.go).
		ContextTimeoutEnabled: true,
		DialerRetries:         1, // the command's retry redials; the client's default 5 tries delay the 503
	}
}

// ErrRedisDown is what every call answers while Redis cannot be reached: the routes on it answer
// 503 with this reason, and the pool logs the outage once, not once per request.
var ErrRedisDown = &Unavailable{Reason: "the shared ledger (Redis) is unavailable"}

// ErrRedisFull is Redis at maxmemory refusing a write (noeviction): new events are refused while
// deliveries, which free memory, go on; it is not an outage.
var ErrRedisFull = &Unavailable{Reason: "the shared ledger (Redis) is out of memory: new events are accepted once deliveries free room"}

// fullQuiet is how long no write may have been refused for want of memory before a Redis that
// was full is logged as having room again: refusals of new events and recorded deliveries
// interleave while it is full.
const fullQuiet = 10 * time.Second

func newRedisPool(target Target) *Ledger {
	quietRedisLog.Do(func() { redis.SetLogger(redisDebugLog{caddy.Log().Named("hookgate.redis")}) })
	return &Ledger{key: target.Key, scope: target.Scope, name: target.Name, redis: target.Redis, logger: caddy.Log().Named("hookgate")}
}

// quietRedisLog turns go-redis's own log lines, one per failed dial to stderr, into Caddy's
// debug log: while Redis is down they would be one per request; the pool logs the outage once.
var quietRedisLog sync.Once

type redisDebugLog struct{ logger *zap.Logger }

func (l redisDebugLog) Printf(_ context.Context, format string, v ...any) {
	l.logger.Debug(fmt.Sprintf(format, v...))
}

// openRedis returns the Redis store, creating its client on first use; it does not connect
// (go-redis dials on the first command), so it never fails. The caller holds p.mu.
func (p *Ledger) openRedis() store {
	if p.ledger == nil {
		l := &redisLedger{name: p.name, logger: p.logger, budget: 2 * p.redis.Options.ReadTimeout}
		opts := *p.redis.Options
		// Each new connection but the check's own may reach another server than the last (a
		// failover): its persistence settings are read again (checkPersistence).
		opts.OnConnect = func(ctx context.Context, _ *redis.Conn) error {
			if ctx.Value(persistenceCheckKey{}) == nil {
				l.connected.Store(true)
			}
			return nil
		}
		client := redis.NewUniversalClient(&opts)
		_, l.cluster = client.(*redis.ClusterClient)
		l.Store = redisstore.New(client, p.redis.Prefix)
		l.Store.OnGoneEvents(l.noteGoneEvents)
		p.ledger = l
	}
	return p.ledger
}

// redisLedger is a Redis store that tells an outage from an answer: a call that fails because
// Redis cannot be reached (down, hung, loading its data after a restart, failing over) returns
// ErrRedisDown, and the first such failure logs one ERROR, the first call that works again one
// INFO. Errors of the ledger's contract (dedupe.ErrNotFound…) pass through as they are.
type redisLedger struct {
	*redisstore.Store
	name   string // the store in logs (Target.name)
	logger *zap.Logger
	// budget bounds each call (within): twice the read timeout.
	budget time.Duration
	// cluster says the store is a Redis Cluster, where each namespace (route) lives on one shard:
	// an outage is then a route's, since one shard may fail, or refuse a slot that is moving
	// (TRYAGAIN) or not served (CLUSTERDOWN), while the others serve their routes.
	cluster bool
	// outages holds the scopes (outageScope) Redis is unavailable to, each logged as it began.
	outages sync.Map
	// fullAt is when a write was last refused for want of memory (Unix ns); 0 when not full
	// (cleared by stored).
	fullAt atomic.Int64
	// connected is set by each new connection to Redis, and checking while the persistence
	// settings are being read (redispersistence.go).
	connected, checking atomic.Bool
	// gone holds each route's goneLog: its queued events found gone from Redis.
	gone sync.Map
	// verdict is what the last persistence check logged.
	verdictMu sync.Mutex
	verdict   string
}

// outageScope is what an outage met by a call about namespace ns concerns: on a Cluster that
// route, on one server (or a Sentinel group's master) the whole store, so that its outage is one
// ERROR and one INFO whatever the number of routes.
func (r *redisLedger) outageScope(ns string) string {
	if r.cluster {
		route, _ := dedupe.SplitQueueNamespace(ns) // its destinations' queues are in its slot
		return route
	}
	return ""
}

// observe notes what a call's error says of Redis for namespace ns, logging a change of state
// once.
func (r *redisLedger) observe(ctx context.Context, ns string, err error) error {
	scope := r.outageScope(ns)
	switch {
	case err != nil && ctx.Err() != nil:
		return err // the caller gave up: that says nothing of Redis
	case err != nil && redis.IsOOMError(err):
		if r.fullAt.Swap(time.Now().UnixNano()) == 0 {
			r.logger.Warn("the shared ledger (Redis) is out of memory (maxmemory): new events are refused with 503 while deliveries free room",
				zap.String("store", r.name), zap.Error(err))
		}
		return ErrRedisFull
	case err != nil && redisUnreachable(err):
		if _, was := r.outages.LoadOrStore(scope, true); !was {
			if scope == "" {
				r.logger.Error("the shared ledger (Redis) is unavailable: hookgate routes on it answer 503 until it is back",
					zap.String("store", r.name), zap.Error(err))
			} else {
				r.logger.Error("the shared ledger (Redis) is unavailable to this route (its Cluster shard cannot serve it): the route answers 503 until it is back",
					zap.String("store", r.name), zap.String("route", scope), zap.Error(err))
			}
		}
		return ErrRedisDown
	}
	if _, was := r.outages.LoadAndDelete(scope); was {
		if scope == "" {
			r.logger.Info("the shared ledger (Redis) is back: hookgate routes on it accept events again", zap.String("store", r.name))
		} else {
			r.logger.Info("the shared ledger (Redis) is back for this route: it accepts events again", zap.String("store", r.name), zap.String("route", scope))
		}
	}
	r.checkPersistence()
	return err
}

// goneLogEvery is how often at most a route's queued events found gone from Redis are logged:
// under an evicting maxmemory-policy the deliverer meets some poll after poll.
const goneLogEvery = time.Minute

// goneLog is a route's count of queued events found gone not logged yet, and when it last
// logged.
type goneLog struct {
	mu       sync.Mutex
	unlogged int
	at       time.Time
}

// noteGoneEvents counts the queue entries of events gone from Redis that a Lease of route ns
// dropped, and logs them unless the route's last such line is less than goneLogEvery old.
func (r *redisLedger) noteGoneEvents(ns string, n int) {
	v, _ := r.gone.LoadOrStore(ns, &goneLog{})
	g := v.(*goneLog)
	g.mu.Lock()
	g.unlogged += n
	g.mu.Unlock()
	r.logGoneEvents(ns)
}

// logGoneEvents logs the count of route ns's gone events not logged yet, unless its last such
// line is less than goneLogEvery old: each Lease calls it, so the count is logged soon after.
func (r *redisLedger) logGoneEvents(ns string) {
	v, ok := r.gone.Load(ns)
	if !ok {
		return
	}
	g := v.(*goneLog)
	g.mu.Lock()
	n := g.unlogged
	if n == 0 || (!g.at.IsZero() && time.Since(g.at) < goneLogEvery) {
		g.mu.Unlock()
		return
	}
	g.unlogged, g.at = 0, time.Now()
	g.mu.Unlock()
	route, destination := dedupe.SplitQueueNamespace(ns)
	r.logger.Warn("dropped queued events whose data is gone from Redis (evicted under an evicting maxmemory-policy, deleted, or lost in a failover): they cannot be delivered",
		zap.String("store", r.name), zap.String("route", route), zap.String("destination", destination), zap.Int("events", n))
}

// stored notes a call that stored a new event (a Claim or Accept answered Claimed): the only
// proof that a full Redis has room again, which a read or a delivery's update is not. It logs
// one INFO once no write has been refused for fullQuiet.
func (r *redisLedger) stored(out dedupe.Outcome, err error) (dedupe.Outcome, error) {
	if at := r.fullAt.Load(); at != 0 && err == nil && out == dedupe.Claimed && time.Since(time.Unix(0, at)) > fullQuiet && r.fullAt.CompareAndSwap(at, 0) {
		r.logger.Info("the shared ledger (Redis) has room again: hookgate routes on it accept events again", zap.String("store", r.name))
	}
	return out, err
}

// redisUnreachable reports whether err says Redis could not answer, rather than refused the call:
// no connection, a timeout, or a server that cannot serve now (loading its data, failing over,
// refusing writes after a failed save, refusing the credentials). Out of memory is ErrRedisFull.
func redisUnreachable(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, redis.ErrPoolExhausted) ||
		redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err) || redis.IsMaxClientsError(err) ||
		redis.IsNoReplicasError(err) || redis.HasErrorPrefix(err, "MISCONF") ||
		redis.IsAuthError(err) || redis.IsPermissionError(err)
}

// Claim implements dedupe.Ledger.
func (r *redisLedger) Claim(ctx context.Context, c dedupe.Claim) (dedupe.Outcome, error) {
	// A claim made after its request was answered 503 is released: the provider's retry of the
	// event would otherwise be refused as still being processed until the claim's lease lapsed
	// (the auto-pipeliner sends a queued script though its caller has gone).
	release := func(out dedupe.Outcome, err error) {
		if err == nil && out == dedupe.Claimed {
			ctx, cancel := context.WithTimeout(context.Background(), r.budget)
			defer cancel()
			_ = r.Store.Release(ctx, c)
		}
	}
	return r.stored(withinOr(ctx, r, c.Namespace, func(ctx context.Context) (dedupe.Outcome, error) { return r.Store.Claim(ctx, c) }, release))
}

// Done implements dedupe.Ledger.
func (r *redisLedger) Done(ctx context.Context, c dedupe.Claim, ttl time.Duration) error {
	return r.run(ctx, c.Namespace, func(ctx context.Context) error { return r.Store.Done(ctx, c, ttl) })
}

// Release implements dedupe.Ledger.
func (r *redisLedger) Release(ctx context.Context, c dedupe.Claim) error {
	return r.run(ctx, c.Namespace, func(ctx context.Context) error { return r.Store.Release(ctx, c) })
}

// Accept implements dedupe.Outbox.
func (r *redisLedger) Accept(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) (dedupe.Outcome, error) {
	return r.stored(within(ctx, r, c.Namespace, func(ctx context.Context) (dedupe.Outcome, error) { return r.Store.Accept(ctx, c, ev, ttl) }))
}

// DoneAndQueue implements dedupe.Outbox.
func (r *redisLedger) DoneAndQueue(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) error {
	return r.run(ctx, c.Namespace, func(ctx context.Context) error { return r.Store.DoneAndQueue(ctx, c, ev, ttl) })
}

// Lease implements dedupe.Outbox.
func (r *redisLedger) Lease(ctx context.Context, ns string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
	evs, err := within(ctx, r, ns, func(ctx context.Context) ([]*dedupe.Event, error) { return r.Store.Lease(ctx, ns, now, n, lease) })
	r.logGoneEvents(ns) // what an earlier call dropped within goneLogEvery of a line
	return evs, err
}

// Update implements dedupe.Outbox.
func (r *redisLedger) Update(ctx context.Context, ev *dedupe.Event, keep time.Duration) error {
	return r.run(ctx, ev.Namespace, func(ctx context.Context) error { return r.Store.Update(ctx, ev, keep) })
}

// DeliveredVersion implements dedupe.Outbox.
func (r *redisLedger) DeliveredVersion(ctx context.Context, ns, entity string) (int64, bool, error) {
	type found struct {
		version int64
		ok      bool
	}
	f, err := within(ctx, r, ns, func(ctx context.Context) (found, error) {
		v, ok, err := r.Store.DeliveredVersion(ctx, ns, entity)
		return found{v, ok}, err
	})
	return f.version, f.ok, err
}

// Get implements dedupe.Outbox.
func (r *redisLedger) Get(ctx context.Context, ns, id string) (*dedupe.Event, error) {
	return within(ctx, r, ns, func(ctx context.Context) (*dedupe.Event, error) { return r.Store.Get(ctx, ns, id) })
}

// List implements dedupe.Outbox.
func (r *redisLedger) List(ctx context.Context, ns string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	return within(ctx, r, ns, func(ctx context.Context) ([]*dedupe.Event, error) { return r.Store.List(ctx, ns, state, after, limit) })
}

// ListDeliveries is List: Redis's listing reads the fields it returns from each event's hash
// and never its header and body fields, so it costs no body either.
func (r *redisLedger) ListDeliveries(ctx context.Context, ns string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	return r.List(ctx, ns, state, after, limit)
}

// Replay implements dedupe.Outbox.
func (r *redisLedger) Replay(ctx context.Context, ns, id string, now time.Time) error {
	return r.run(ctx, ns, func(ctx context.Context) error { return r.Store.Replay(ctx, ns, id, now) })
}

// Pending is the namespace's backlog.
func (r *redisLedger) Pending(ctx context.Context, ns string) (int, error) {
	return within(ctx, r, ns, func(ctx context.Context) (int, error) { return r.Store.Pending(ctx, ns) })
}

// Outbox is the pool entry as its deliverers' outbox: on Redis it also keeps the routes' rate
// limits, shared by every node (dedupe.StartLimiter); on Badger each deliverer keeps its own.
func (p *Ledger) Outbox() dedupe.Outbox {
	if p.redis != nil {
		return sharedStarts{p}
	}
	return p
}

// sharedStarts is a Redis pool entry whose routes take their starts from Redis.
type sharedStarts struct{ *Ledger }

// TakeStart implements dedupe.StartLimiter.
func (s sharedStarts) TakeStart(ctx context.Context, ns string, interval, ahead time.Duration) (time.Duration, error) {
	l, err := s.open()
	if err != nil {
		return 0, err
	}
	limiter, ok := l.(dedupe.StartLimiter)
	if !ok {
		return 0, fmt.Errorf("hookgate: ledger %s keeps no shared delivery rate", s.name)
	}
	return limiter.TakeStart(ctx, ns, interval, ahead)
}

// TakeStart implements dedupe.StartLimiter within the Redis call budget.
func (r *redisLedger) TakeStart(ctx context.Context, ns string, interval, ahead time.Duration) (time.Duration, error) {
	return within(ctx, r, ns, func(ctx context.Context) (time.Duration, error) { return r.Store.TakeStart(ctx, ns, interval, ahead) })
}

// Interface guards
var (
	_ store               = (*redisLedger)(nil)
	_ dedupe.StartLimiter = sharedStarts{}
	_ dedupe.StartLimiter = (*redisLedger)(nil)
)
