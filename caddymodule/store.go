package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/hookgate/hookgate/dedupe"
)

// ledgers holds one open store per absolute directory across config reloads: Caddy provisions the
// new config before cleaning up the old one, and Badger locks its directory, so the two configs must
// share one handle rather than each open their own.
var ledgers = caddy.NewUsagePool()

// pooledLedger opens its store on first use, not at provision time, so that `caddy validate` (a
// separate process) can provision a config while the server holds the directory's lock.
type pooledLedger struct {
	dir string

	mu     sync.Mutex
	ledger store
	closed bool
}

// store is what the pool uses of an open *dedupe.Badger; tests wrap one to make it fail.
type store interface {
	dedupe.Ledger
	dedupe.Outbox
}

func acquireLedger(dir string) (*pooledLedger, error) {
	val, _, err := ledgers.LoadOrNew(dir, func() (caddy.Destructor, error) {
		return &pooledLedger{dir: dir}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("hookgate: ledger %s: %w", dir, err)
	}
	return val.(*pooledLedger), nil
}

// release drops one config's reference; the last one closes the store.
func (p *pooledLedger) release() error {
	_, err := ledgers.Delete(p.dir)
	return err
}

// Destruct closes the store when no config uses it any more.
func (p *pooledLedger) Destruct() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.ledger == nil {
		return nil
	}
	err := p.ledger.Close()
	p.ledger = nil
	return err
}

// open returns the store, opening it if needed. A failed open is retried on the next request, so a
// transient problem (another process still holding the lock) does not stick.
func (p *pooledLedger) open() (store, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errLedgerClosed
	}
	if p.ledger == nil {
		l, err := dedupe.OpenBadger(p.dir)
		if err != nil {
			return nil, fmt.Errorf("opening ledger: %w", err)
		}
		p.ledger = l
	}
	return p.ledger, nil
}

var errLedgerClosed = errors.New("ledger closed")

// Claim implements dedupe.Ledger.
func (p *pooledLedger) Claim(ctx context.Context, c dedupe.Claim) (dedupe.Outcome, error) {
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
func (p *pooledLedger) Accept(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, ttl time.Duration) (dedupe.Outcome, error) {
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
	return l.Lease(ctx, ns, now, n, lease)
}

// Update implements dedupe.Outbox.
func (p *pooledLedger) Update(ctx context.Context, ev *dedupe.Event, keep time.Duration) error {
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
func (p *pooledLedger) List(ctx context.Context, ns string, state dedupe.State, limit int) ([]*dedupe.Event, error) {
	l, err := p.open()
	if err != nil {
		return nil, err
	}
	return l.List(ctx, ns, state, limit)
}

// Replay implements dedupe.Outbox.
func (p *pooledLedger) Replay(ctx context.Context, ns, id string, now time.Time) error {
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
