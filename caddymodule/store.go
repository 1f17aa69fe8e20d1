package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/badgerstore"
)

// ledgers holds one open store per storeTarget.key (Badger's absolute directory, or Redis's
// addresses, db, user, prefix and client settings) across config reloads: Caddy provisions the new config
// before cleaning up the old one, and Badger locks its directory, so the two configs must share
// one handle rather than each open their own; a Redis store's configs share one client.
var ledgers = caddy.NewUsagePool()

// reopenDelay is the least time between a store's failure or a failed open and the next open:
// meanwhile requests are answered 503 at once rather than each trying to open the store.
const reopenDelay = 2 * time.Second

// pooledLedger opens its store on first use, not at provision time, so that `caddy validate` (a
// separate process) can provision a config while the server holds the directory's lock.
//
// A store that failed a write (badgerstore.ErrStoreFailed) refuses everything; the pool then closes it
// and, on a request at least reopenDelay later, opens the directory again, so the service
// recovers from what the disk holds without a reload.
//
// Its disk watermark (diskspace.go) refuses new work when the filesystem runs low, and keeps the
// store closed while there is not even room to open it.
//
// A Redis store (redispool.go) has neither: it is opened once, and while Redis cannot be reached
// its calls fail with errRedisDown until it answers again.
type pooledLedger struct {
	key    string         // the pool's key (storeTarget.key); never logged
	scope  string         // the data the routes' names share (storeTarget.scope)
	name   string         // the store in logs and errors (storeTarget.name)
	dir    string         // Badger's directory; "" for Redis
	disk   *diskWatermark // Badger only; nil (never low) for Redis
	redis  *redisTarget   // Redis only
	logger *zap.Logger

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
	// reclaiming is set while a reclaim runs, reclaimedAt when the last one ended (reclaim.go).
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

// Pending is the namespace's backlog, from Badger's counter.
func (b *badgerStore) Pending(_ context.Context, namespace string) (int, error) {
	return b.Store.Pending(namespace), nil
}

// acquireLedger returns the store's pool entry, creating it (for Badger with minFree as its
// disk watermark; a running entry keeps its watermark until the config that uses it starts:
// App.Start sets it).
func acquireLedger(target storeTarget, minFree uint64) (*pooledLedger, error) {
	val, _, err := ledgers.LoadOrNew(target.key, func() (caddy.Destructor, error) {
		if target.redis != nil {
			return newRedisPool(target), nil
		}
		return newPooledLedger(target.dir, minFree), nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", target.name, err)
	}
	return val.(*pooledLedger), nil
}

func newPooledLedger(dir string, minFree uint64) *pooledLedger {
	logger := caddy.Log().Named("hookgate")
	return &pooledLedger{key: dir, scope: dir, name: dir, dir: dir, logger: logger, disk: &diskWatermark{dir: dir, free: statfsFree, minFree: minFree, logger: logger}}
}

// release drops one config's reference; the last one closes the store.
func (p *pooledLedger) release() error {
	_, err := ledgers.Delete(p.key)
	return err
}

// Destruct closes the store when no config uses it any more, and waits for a failed one being
// closed, so the directory's lock is free when it returns.
func (p *pooledLedger) Destruct() error {
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
func (p *pooledLedger) open() (store, error) {
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
		p.logUnavailable(errDiskFull, zap.String("free", humanize.IBytes(avail)), zap.String("needs", humanize.IBytes(need)))
		return nil, errDiskFull
	}
	l, err := p.openStore()
	if errors.Is(err, badgerstore.ErrLocked) {
		pid, cmdline := badgerstore.LockHolder(p.dir)
		p.logUnavailable(errLedgerLocked, zap.Int("holder_pid", pid), zap.String("holder_cmdline", cmdline), zap.Error(err))
		err = errLedgerLocked
	}
	if err != nil {
		p.notBefore = time.Now().Add(reopenDelay)
		if err != errLedgerLocked {
			p.unavailable = ""
			return nil, fmt.Errorf("opening ledger: %w", err)
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
func (p *pooledLedger) logUnavailable(cause *unavailableError, fields ...zap.Field) {
	if p.unavailable == cause.reason {
		return
	}
	p.unavailable = cause.reason
	p.logger.Error("ledger not opened: "+cause.reason+"; hookgate routes answer 503 until it opens",
		append([]zap.Field{zap.String("dir", p.dir)}, fields...)...)
}

// unavailableOr is err, or while the store cannot be opened for a cause already logged, that
// cause: a request between two tries is refused for the same reason. The caller holds p.mu.
func (p *pooledLedger) unavailableOr(err error) error {
	for _, cause := range []*unavailableError{errDiskFull, errLedgerLocked} {
		if p.unavailable == cause.reason {
			return cause
		}
	}
	return err
}

// openStore opens the directory: afresh, or after a store of this process failed, with
// badgerstore.Reopen, which leaves the leases its deliverers still hold and the sync-mode
// claims of requests still with the app as they are, so neither is handed out twice.
func (p *pooledLedger) openStore() (store, error) {
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
		return observedBadger(l), nil
	}
	l, err := badgerstore.Reopen(previous)
	if err != nil {
		return nil, err
	}
	p.failed = nil
	return observedBadger(l), nil
}

// retire takes the failed store out of use and closes it in the background: Badger's Close
// writes out its memtable, which on a failing disk may take long, and meanwhile requests are
// answered 503 at once. The caller holds p.mu.
func (p *pooledLedger) retire(cause error) {
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
	errDiskFull        = &unavailableError{reason: "the ledger's disk is full: it opens once space is freed"}
	errLedgerLocked    = &unavailableError{reason: "the ledger's directory is locked by another process"}
)

// Claim implements dedupe.Ledger.
// A claim is refused while the disk is below its watermark: the app must not get an event whose
// done may not be recorded.
func (p *pooledLedger) Claim(ctx context.Context, c dedupe.Claim) (dedupe.Outcome, error) {
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
func (p *pooledLedger) Done(ctx context.Context, c dedupe.Claim, ttl time.Duration) error {
	l, err := p.open()
	if err != nil {
		return err
	}
	return l.Done(ctx, c, ttl)
}

// Release implements dedupe.Ledger.
func (p *pooledLedger) Release(ctx context.Context, c dedupe.Claim) error {
	l, err := p.open()
	if err != nil {
		return err
	}
	return l.Release(ctx, c)
}

// Close is a no-op: the pool closes the store when its last config lets go.
func (p *pooledLedger) Close() error { return nil }

// Accept implements dedupe.Outbox.
// It is refused while the disk is below its watermark, so that what is already queued can
// still be delivered.
func (p *pooledLedger) Accept(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) (dedupe.Outcome, error) {
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

// Lease implements dedupe.Outbox.
func (p *pooledLedger) Lease(ctx context.Context, ns string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
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
func (p *pooledLedger) Update(ctx context.Context, ev *dedupe.Event, keep time.Duration) error {
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
func (p *pooledLedger) DeliveredVersion(ctx context.Context, ns, entity string) (int64, bool, error) {
	l, err := p.open()
	if err != nil {
		return 0, false, err
	}
	return l.DeliveredVersion(ctx, ns, entity)
}

// Get implements dedupe.Outbox.
func (p *pooledLedger) Get(ctx context.Context, ns, id string) (*dedupe.Event, error) {
	l, err := p.open()
	if err != nil {
		return nil, err
	}
	return l.Get(ctx, ns, id)
}

// List implements dedupe.Outbox.
func (p *pooledLedger) List(ctx context.Context, ns string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	l, err := p.open()
	if err != nil {
		return nil, err
	}
	return l.List(ctx, ns, state, after, limit)
}

// ListDeliveries lists the route's events' deliveries, without their bodies.
func (p *pooledLedger) ListDeliveries(ctx context.Context, ns string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	l, err := p.open()
	if err != nil {
		return nil, err
	}
	return l.ListDeliveries(ctx, ns, state, after, limit)
}

// Pending is the route's backlog of undelivered events.
func (p *pooledLedger) Pending(ctx context.Context, ns string) (int, error) {
	l, err := p.open()
	if err != nil {
		return 0, err
	}
	return l.Pending(ctx, ns)
}

// Replay implements dedupe.Outbox.
// Below the watermark it is refused (dedupe.ErrNoRoom): a replay stores the body again.
func (p *pooledLedger) Replay(ctx context.Context, ns, id string, now time.Time) error {
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
	_ caddy.Destructor = (*pooledLedger)(nil)
	_ dedupe.Ledger    = (*pooledLedger)(nil)
	_ dedupe.Outbox    = (*pooledLedger)(nil)
)
