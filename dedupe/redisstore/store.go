package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/redis/go-redis/v9"
)

var errNotImplemented = errors.New("redisstore: not implemented yet")

// Store is a dedupe.Ledger and dedupe.Outbox kept in Redis, shared by every gateway node that
// uses the same server (or Cluster) and prefix.
type Store struct {
	client redis.UniversalClient
	prefix string
}

// New returns a store over client; prefix "" means "hookgate". The store owns the client: Close
// closes it.
func New(client redis.UniversalClient, prefix string) *Store {
	if prefix == "" {
		prefix = "hookgate"
	}
	return &Store{client: client, prefix: prefix}
}

// Close closes the client.
func (s *Store) Close() error { return s.client.Close() }

// Claim implements dedupe.Ledger.
func (s *Store) Claim(ctx context.Context, c dedupe.Claim) (dedupe.Outcome, error) {
	return 0, errNotImplemented
}

// Done implements dedupe.Ledger.
func (s *Store) Done(ctx context.Context, c dedupe.Claim, ttl time.Duration) error {
	return errNotImplemented
}

// Release implements dedupe.Ledger.
func (s *Store) Release(ctx context.Context, c dedupe.Claim) error { return errNotImplemented }

// Accept implements dedupe.Outbox.
func (s *Store) Accept(ctx context.Context, c dedupe.Claim, ev *dedupe.Event, dedupeTTL time.Duration) (dedupe.Outcome, error) {
	return 0, errNotImplemented
}

// Lease implements dedupe.Outbox.
func (s *Store) Lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
	return nil, errNotImplemented
}

// Update implements dedupe.Outbox.
func (s *Store) Update(ctx context.Context, ev *dedupe.Event, keep time.Duration) error {
	return errNotImplemented
}

// DeliveredVersion implements dedupe.Outbox.
func (s *Store) DeliveredVersion(ctx context.Context, namespace, entity string) (int64, bool, error) {
	return 0, false, errNotImplemented
}

// Get implements dedupe.Outbox.
func (s *Store) Get(ctx context.Context, namespace, id string) (*dedupe.Event, error) {
	return nil, errNotImplemented
}

// List implements dedupe.Outbox.
func (s *Store) List(ctx context.Context, namespace string, state dedupe.State, after dedupe.Cursor, limit int) ([]*dedupe.Event, error) {
	return nil, errNotImplemented
}

// Replay implements dedupe.Outbox.
func (s *Store) Replay(ctx context.Context, namespace, id string, now time.Time) error {
	return errNotImplemented
}

// Pending is the exact backlog of Pending events of namespace.
func (s *Store) Pending(ctx context.Context, namespace string) (int, error) {
	return 0, errNotImplemented
}

// PendingByNamespace is the backlog of every namespace that has one.
func (s *Store) PendingByNamespace(ctx context.Context) (map[string]int, error) {
	return nil, errNotImplemented
}

// CheckPersistence reads appendonly/appendfsync (CONFIG GET) on every master. warning is "" when
// every master has appendonly yes + appendfsync always; else a plain sentence saying what can be
// lost. err when the settings cannot be read (CONFIG refused by an ACL or a managed service).
func (s *Store) CheckPersistence(ctx context.Context) (warning string, err error) {
	return "", errNotImplemented
}

var (
	_ dedupe.Ledger = (*Store)(nil)
	_ dedupe.Outbox = (*Store)(nil)
)
