// Package ledgerpool keeps hookgate's ledgers open across Caddy config reloads: one store per
// Badger directory or Redis client, shared by every route and config that uses it, opened on
// first use, reopened from disk after a failed write, refusing new events while its disk is
// nearly full, and telling a Redis outage from an answer. It uses Caddy's UsagePool and logger
// only; the routes (caddymodule) turn its refusals into 503s, log lines and metrics.
package ledgerpool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/dustin/go-humanize"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/badgerstore"
)

// Target is where a route's ledger lives: a Badger directory, or a Redis store.
type Target struct {
	// Key is the pool's key: Badger's absolute directory, or for Redis its scope and a
	// fingerprint of every client setting (password, TLS, timeouts…), so that a reload changing
	// one gets a client with the new settings. It is never logged.
	Key string
	// Scope is the data the routes' names share: Badger's directory, or Redis's addresses, db,
	// user and prefix; two routes of one name in one scope would mix their events.
	Scope string
	// Name is how logs and errors name the store: Scope without Redis's user.
	Name string
	// Dir is Badger's directory; "" for Redis.
	Dir string
	// Redis is how to reach the Redis store; nil for Badger.
	Redis *RedisTarget
}

// RedisTarget is a Redis store's client settings, secrets expanded.
type RedisTarget struct {
	Options *redis.UniversalOptions
	// Prefix starts every key the store writes.
	Prefix string
}

// BadgerTarget is the Target of a Badger directory.
func BadgerTarget(dir string) Target {
	return Target{Key: dir, Scope: dir, Name: dir, Dir: dir}
}

// ledgers holds one open store per Target.Key (Badger's absolute directory, or Redis's
// addresses, db, user, prefix and client settings) across config reloads: Caddy provisions the new config
// before cleaning up the old one, and Badger locks its directory, so the two configs must share
// one handle rather than each open their own; a Redis store's configs share one client.
var ledgers = caddy.NewUsagePool()

// reopenDelay is the least time between a store's failure or a failed open and the next open:
// meanwhile requests are answered 503 at once rather than each trying to open the store.
const reopenDelay = 2 * time.Second

// Ledger opens its store on first use, not at provision time, so that `caddy validate` (a
// separate process) can provision a config while the server holds the directory's lock.
//
// A store that failed a write (badgerstore.ErrStoreFailed) refuses everything; the pool then closes it
// and, on a request at least reopenDelay later, opens the directory again, so the service
// recovers from what the disk holds without a reload.
//
// Its disk watermark (diskspace.go) refuses new work when the filesystem runs low, and keeps the
// store closed while there is not even room to open it.
//
// A Redis store (redis.go) has neither: it is opened once, and while Redis cannot be reached
// its calls fail with ErrRedisDown until it answers again.
type Ledger struct {
	key    string         // the pool's key (Target.Key); never logged
	scope  string         // the data the routes' names share (Target.Scope)
	name   string         // the store in logs and errors (Target.Name)
	dir    string         // Badger's directory; "" for Redis
	disk   *diskWatermark // Badger only; nil (never low) for Redis
	redis  *RedisTarget   // Redis only
	logger *zap.Logger
	// commits is told of each group commit of a Badger store (for metrics); nil tells no one.
	commits badgerstore.CommitObserver

	mu     sync.Mutex
	ledger store
	// retiring is closed once a failed store's Close returned; nil when none is closing.
	retiring chan struct{}
	// failed is the last store that failed, which the next open reopens (see reopen).
	failed store
	// notBefore is when the store may be opened again after a failure.
	notBefore time.Time
	closed    bool
	// unavailable is why the store could not be opened, as last logged; "" once it is open.
	unavailable string
	// reclaiming is set while a reclaim runs, reclaimedAt when the last one ended (diskspace.go).
	reclaiming  bool
	reclaimedAt time.Time
}

// store is what the pool uses of an open store (a *badgerStore or a *redisLedger); tests wrap
// one to make it fail.
type store interface {
	dedupe.Ledger
	dedupe.Outbox
	// PendingByNamespace counts the pending events of each namespace that has any.
	PendingByNamespace(ctx context.Context) (map[string]int, error)
	// Pending is a namespace's backlog of undelivered events.
	Pending(ctx context.Context, namespace string) (int, error)
	// ListDeliveries is List with each event's ID and delivery only (state, attempts, last
	// status and error, times), read without the event's body: what the dead-letter page shows.
	ListDeliveries(ctx context.Context, namespace string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error)
}

// failing is a store that can fail for good (Badger, after a failed write).
type failing interface {
	// Err is non-nil once the store failed a write; it must then be closed and opened again.
	Err() error
}

// storeErr is the store's Err, or nil for a store that cannot fail for good.
func storeErr(s store) error {
	if f, ok := s.(failing); ok {
		return f.Err()
	}
	return nil
}

// reclaimer is a store that can give back the disk space of delivered and expired bodies now
// (Badger).
type reclaimer interface {
	Reclaim(ctx context.Context) error
}

// badgerStore is an open Badger ledger as a store.
type badgerStore struct{ *badgerstore.Store }

// observed is an open Badger ledger whose group commits the pool's observer is told of.
func (p *Ledger) observed(l *badgerstore.Store) *badgerStore {
	if p.commits != nil {
		l.ObserveCommits(p.commits)
	}
	return &badgerStore{l}
}

// Pending is the namespace's backlog, from Badger's counter.
func (b *badgerStore) Pending(_ context.Context, namespace string) (int, error) {
	return b.Store.Pending(namespace), nil
}

// Acquire returns the store's pool entry, creating it (for Badger with minFree as its
// disk watermark, and commits told of its group commits; a running entry keeps its watermark
// until the config that uses it starts and calls SetMinFree). Each Acquire is paired with a
// Detach.
func Acquire(target Target, minFree uint64, commits badgerstore.CommitObserver) (*Ledger, error) {
	val, _, err := ledgers.LoadOrNew(target.Key, func() (caddy.Destructor, error) {
		if target.Redis != nil {
			return newRedisPool(target), nil
		}
		p := newBadgerPool(target, minFree)
		p.commits = commits
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", target.Name, err)
	}
	return val.(*Ledger), nil
}

// newBadgerPool is the pool entry of a Badger target, watching its disk with minFree.
func newBadgerPool(target Target, minFree uint64) *Ledger {
	logger := caddy.Log().Named("hookgate")
	dir := target.Dir
	return &Ledger{key: target.Key, scope: target.Scope, name: target.Name, dir: dir, logger: logger,
		disk: &diskWatermark{dir: dir, free: statfsFree, minFree: minFree, logger: logger}}
}

// Detach drops one config's reference; the last one closes the store.
func (p *Ledger) Detach() error {
	_, err := ledgers.Delete(p.key)
	return err
}

// Key is the pool's key (Target.Key); never log it.
func (p *Ledger) Key() string { return p.key }

// Scope is the data the routes' names share (Target.Scope).
func (p *Ledger) Scope() string { return p.scope }

// Name is the store in logs and errors (Target.Name).
func (p *Ledger) Name() string { return p.name }

// SetMinFree sets the free space below which new events are refused, e.g. when a reload
// changes min_free. A Redis store has no disk to watch.
func (p *Ledger) SetMinFree(minFree uint64) { p.disk.setMinFree(minFree) }

// DiskFree reports the free space of a Badger store's filesystem (a reading at most
// diskCheckInterval old) and whether new events are refused for want of it; ok is false for
// Redis.
func (p *Ledger) DiskFree() (avail uint64, low, ok bool) {
	if p.disk == nil {
		return 0, false, false
	}
	avail, _, low = p.disk.read()
	return avail, low, true
}

// Destruct closes the store when no config uses it any more, and waits for a failed one being
// closed, so the directory's lock is free when it returns.
func (p *Ledger) Destruct() error {
	p.mu.Lock()
	p.closed = true
	l, retiring := p.ledger, p.retiring
	p.ledger = nil
	p.mu.Unlock()
	if retiring != nil {
		<-retiring
	}
	if l == nil {
		return nil
	}
	return l.Close()
}

// open returns the store, opening it if needed. A failed open, or a store that failed, is retried
// on a request reopenDelay later, so a transient problem (another process still holding the lock,
// a disk that refused a write) does not stick, and a lasting one costs no open per request.
func (p *Ledger) open() (store, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errLedgerClosed
	}
	if p.redis != nil {
		return p.openRedis(), nil
	}
	if p.ledger != nil {
		err := storeErr(p.ledger)
		if err == nil {
			return p.ledger, nil
		}
		p.retire(err)
	}
	if p.retiring != nil {
		select {
		case <-p.retiring:
			p.retiring = nil
		default:
			return nil, errLedgerReopening
		}
	}
	if time.Now().Before(p.notBefore) {
		return nil, p.unavailableOr(errLedgerReopening)
	}
	if avail, need, ok := p.disk.roomToOpen(); !ok {
		p.logUnavailable(ErrDiskFull, zap.String("free", humanize.IBytes(avail)), zap.String("needs", humanize.IBytes(need)))
		return nil, ErrDiskFull
	}
	l, err := p.openStore()
	if errors.Is(err, badgerstore.ErrLocked) {
		pid, cmdline := badgerstore.LockHolder(p.dir)
		p.logUnavailable(ErrLedgerLocked, zap.Int("holder_pid", pid), zap.String("holder_cmdline", cmdline), zap.Error(err))
		err = ErrLedgerLocked
	}
	if err != nil {
		p.notBefore = time.Now().Add(reopenDelay)
		if err != ErrLedgerLocked {
			// Logged here, with its cause, whoever asked: the first to ask may be a caller that
			// does not log (the stranded-queue scan at a config's start).
			p.logUnavailable(ErrLedgerNotOpened, zap.Duration("retry_in", reopenDelay), zap.Error(err))
			return nil, ErrLedgerNotOpened
		}
		return nil, err
	}
	if p.unavailable != "" {
		p.logger.Info("ledger opened", zap.String("dir", p.dir))
		p.unavailable = ""
	}
	p.ledger = l
	return l, nil
}

// logUnavailable logs why the store cannot be opened, once per cause rather than once per
// request or retry. The caller holds p.mu.
func (p *Ledger) logUnavailable(cause *Unavailable, fields ...zap.Field) {
	if p.unavailable == cause.Reason {
		return
	}
	p.unavailable = cause.Reason
	p.logger.Error("ledger not opened: "+cause.Reason+"; hookgate routes answer 503 until it opens",
		append([]zap.Field{zap.String("dir", p.dir)}, fields...)...)
}

// unavailableOr is err, or while the store cannot be opened for a cause already logged, that
// cause: a request between two tries is refused for the same reason. The caller holds p.mu.
func (p *Ledger) unavailableOr(err error) error {
	for _, cause := range []*Unavailable{ErrDiskFull, ErrLedgerLocked, ErrLedgerNotOpened} {
		if p.unavailable == cause.Reason {
			return cause
		}
	}
	return err
}

// openStore opens the directory: afresh, or after a store of this process failed, with
// badgerstore.Reopen, which leaves the leases its deliverers still hold and the sync-mode
// claims of requests still with the app as they are, so neither is handed out twice.
func (p *Ledger) openStore() (store, error) {
	var previous *badgerstore.Store
	for s := p.failed; s != nil && previous == nil; {
		switch f := s.(type) {
		case *badgerStore:
			previous = f.Store
		case interface{ Unwrap() store }:
			s = f.Unwrap()
		default:
			s = nil
		}
	}
	if previous == nil {
		l, err := badgerstore.Open(p.dir)
		if err != nil {
			return nil, err
		}
		return p.observed(l), nil
	}
	l, err := badgerstore.Reopen(previous)
	if err != nil {
		return nil, err
	}
	p.failed = nil
	return p.observed(l), nil
}

// retire takes the failed store out of use and closes it in the background: Badger's Close
// writes out its memtable, which on a failing disk may take long, and meanwhile requests are
// answered 503 at once. The caller holds p.mu.
func (p *Ledger) retire(cause error) {
	failed := p.ledger
	p.ledger, p.failed = nil, failed
	p.notBefore = time.Now().Add(reopenDelay)
	done := make(chan struct{})
	p.retiring = done
	logger := p.logger
	logger.Error("ledger failed a write; closing it to reopen it from disk",
		zap.String("dir", p.dir), zap.Duration("reopen_in", reopenDelay), zap.Error(cause))
	go func() {
		defer close(done)
		if err := failed.Close(); err != nil {
			logger.Error("closing the failed ledger", zap.String("dir", p.dir), zap.Error(err))
		}
	}()
}

var (
	errLedgerClosed    = errors.New("ledger closed")
	errLedgerReopening = errors.New("ledger failed; it is being reopened")
)

// The refusals of a Badger store that cannot be opened, each logged once when it begins.
var (
	// ErrDiskFull: less than half of min_free is left, too little to open the store.
	ErrDiskFull = &Unavailable{Reason: "the ledger's disk is full: it opens once space is freed"}
	// ErrLedgerLocked: another process holds the directory's lock.
	ErrLedgerLocked = &Unavailable{Reason: "the ledger's directory is locked by another process"}
	// ErrLedgerNotOpened: Badger refused to open the directory for another cause (in the log);
	// it is tried again after reopenDelay.
	ErrLedgerNotOpened = &Unavailable{Reason: "the ledger could not be opened: it is tried again every " + reopenDelay.String()}
)

// Claim implements dedupe.Ledger.
// A claim is refused while the disk is below its watermark: the app must not get an event whose
// done may not be recorded.
func (p *Ledger) Claim(ctx context.Context, c dedupe.Claim) (dedupe.Outcome, error) {
	if err := p.disk.admit(); err != nil {
		p.reclaimWhileLow()
		return 0, err
	}
	l, err := p.open()
	if err != nil {
		return 0, err
	}
	return l.Claim(ctx, c)
}

// Done implements dedupe.Ledger.
func (p *Ledger) Done(ctx context.Context, c dedupe.Claim, ttl time.Duration) error {
	l, err := p.open()
	if err != nil {
		return err
	}
	return l.Done(ctx, c, ttl)
}

// Release implements dedupe.Ledger.
func (p *Ledger) Release(ctx context.Context, c dedupe.Claim) error {
	l, err := p.open()
	if err != nil {
		return err
	}
	return l.Release(ctx, c)
}

// Close is a no-op: the pool closes the store when its last config lets go.
func (p *Ledger) Close() error { return nil }

// Accept implements dedupe.Outbox.
// It is refused while the disk is below its watermark, so that what is already queued can
// still be delivered.
func (p *Ledger) Accept(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) (dedupe.Outcome, error) {
	if err := p.disk.admit(); err != nil {
		p.reclaimWhileLow()
		return 0, err
	}
	l, err := p.open()
	if err != nil {
		return 0, err
	}
	return l.Accept(ctx, c, ev, ttl)
}

// orderer is the open store's ordered queues (dedupe.Orderer).
func (p *Ledger) orderer() (dedupe.Orderer, error) {
	l, err := p.open()
	if err != nil {
		return nil, err
	}
	o, ok := l.(dedupe.Orderer)
	if !ok {
		return nil, fmt.Errorf("the ledger %s keeps no ordered queues", p.name)
	}
	return o, nil
}

// Skip implements dedupe.Orderer.
func (p *Ledger) Skip(ctx context.Context, ns, id string, now time.Time, keep time.Duration) error {
	o, err := p.orderer()
	if err != nil {
		return err
	}
	return o.Skip(ctx, ns, id, now, keep)
}

// HeldKeys implements dedupe.Orderer.
func (p *Ledger) HeldKeys(ctx context.Context, ns, afterKey string, limit int) ([]dedupe.HeldKey, error) {
	o, err := p.orderer()
	if err != nil {
		return nil, err
	}
	return o.HeldKeys(ctx, ns, afterKey, limit)
}

// CountHeld implements dedupe.Orderer.
func (p *Ledger) CountHeld(ctx context.Context, ns string) (int, error) {
	o, err := p.orderer()
	if err != nil {
		return 0, err
	}
	return o.CountHeld(ctx, ns)
}

// DoneAndQueue implements dedupe.Outbox. Like Done it is not refused below the disk's
// watermark: the claim it settles was admitted, and the app has taken the event.
func (p *Ledger) DoneAndQueue(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) error {
	l, err := p.open()
	if err != nil {
		return err
	}
	return l.DoneAndQueue(ctx, c, ev, ttl)
}

// Lease implements dedupe.Outbox.
func (p *Ledger) Lease(ctx context.Context, ns string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
	l, err := p.open()
	if err != nil {
		return nil, err
	}
	p.reclaimWhileLow() // the deliverer polls even when no provider sends: space comes back as it drains
	return l.Lease(ctx, ns, now, n, lease)
}

// Update implements dedupe.Outbox.
// Below the watermark an update to Dead is refused (dedupe.ErrNoRoom): a dead letter stores its
// body again, and a backlog dead-lettered at once would write as much as filled the disk.
func (p *Ledger) Update(ctx context.Context, ev *dedupe.Event, keep time.Duration) error {
	if ev.State == dedupe.Dead && p.disk.isLow() {
		p.reclaimWhileLow()
		return fmt.Errorf("dead-lettering %q: %w", ev.ID, dedupe.ErrNoRoom)
	}
	l, err := p.open()
	if err != nil {
		return err
	}
	return l.Update(ctx, ev, keep)
}

// DeliveredVersion implements dedupe.Outbox.
func (p *Ledger) DeliveredVersion(ctx context.Context, ns, entity string) (int64, bool, error) {
	l, err := p.open()
	if err != nil {
		return 0, false, err
	}
	return l.DeliveredVersion(ctx, ns, entity)
}

// Get implements dedupe.Outbox.
func (p *Ledger) Get(ctx context.Context, ns, id string) (*dedupe.Event, error) {
	l, err := p.open()
	if err != nil {
		return nil, err
	}
	return l.Get(ctx, ns, id)
}

// List implements dedupe.Outbox.
func (p *Ledger) List(ctx context.Context, ns string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	l, err := p.open()
	if err != nil {
		return nil, err
	}
	return l.List(ctx, ns, state, after, limit)
}

// ListDeliveries lists the route's events' deliveries, without their bodies.
func (p *Ledger) ListDeliveries(ctx context.Context, ns string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	l, err := p.open()
	if err != nil {
		return nil, err
	}
	return l.ListDeliveries(ctx, ns, state, after, limit)
}

// Pending is the route's backlog of undelivered events.
func (p *Ledger) Pending(ctx context.Context, ns string) (int, error) {
	l, err := p.open()
	if err != nil {
		return 0, err
	}
	return l.Pending(ctx, ns)
}

// Replay implements dedupe.Outbox.
// Below the watermark it is refused (dedupe.ErrNoRoom): a replay stores the body again.
func (p *Ledger) Replay(ctx context.Context, ns, id string, now time.Time) error {
	if p.disk.isLow() {
		return fmt.Errorf("replaying %q: %w", id, dedupe.ErrNoRoom)
	}
	l, err := p.open()
	if err != nil {
		return err
	}
	return l.Replay(ctx, ns, id, now)
}

// Interface guards
var (
	_ caddy.Destructor = (*Ledger)(nil)
	_ dedupe.Ledger    = (*Ledger)(nil)
	_ dedupe.Outbox    = (*Ledger)(nil)
)
