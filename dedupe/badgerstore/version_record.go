package badgerstore

import (
	"errors"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// versionEntry is an entity's version record, kept for ttl from now (0: for good). Badger's
// whole-second TTL is exact enough for a setting counted in days, so unlike event records the
// value carries no expiry of its own.
//
// Only an advance writes it; a stale answer refreshes nothing. An older event was sent before the
// one that advanced the version, so the provider stops retrying it within its retry horizon of
// that advance, which ttl covers; and a stale answer (a Claim, an Accept) stays a read, not a
// synced write.
func versionEntry(k []byte, version int64, ttl time.Duration) *badger.Entry {
	e := badger.NewEntry(k, versionValue(version))
	if ttl > 0 {
		e = e.WithTTL(ttl)
	}
	return e
}

// deliveredEntry is the entity's delivered-version record, expiring when its accepted version
// does: the delivered version is never newer than the accepted one, so once that has expired
// nothing is known to be stale anyway, and the Outbox's Update need not be told the TTL. nil when
// the accepted version has already expired (the event waited longer than the version TTL): then
// there is nothing to keep.
func deliveredEntry(txn *badger.Txn, namespace, entity string, dk []byte, version int64) (*badger.Entry, error) {
	vk, err := key(routeOf(namespace), kindVersion, entity)
	if err != nil {
		return nil, err
	}
	accepted, err := txn.Get(vk)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e := badger.NewEntry(dk, versionValue(version))
	e.ExpiresAt = accepted.ExpiresAt()
	return e, nil
}

// advanceAccepted writes the entity's accepted version c.Version (vk is its key), for
// c.VersionTTL from now, and gives its delivered version in each of the event's queues, if any,
// the same new expiry: it is to expire with the accepted one, not before it, or an older event
// still queued would be sent after a newer one was delivered rather than superseded.
func advanceAccepted(txn *badger.Txn, c dedupe.Claim, vk []byte, queues []outboxKeys) error {
	accepted := versionEntry(vk, c.Version, c.VersionTTL)
	if err := txn.SetEntry(accepted); err != nil {
		return err
	}
	for _, q := range queues {
		dk, err := key(q.ns, kindDelivered, c.Entity)
		if err != nil {
			return err
		}
		delivered, found, err := getVersion(txn, dk)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		e := badger.NewEntry(dk, versionValue(delivered))
		e.ExpiresAt = accepted.ExpiresAt
		if err := txn.SetEntry(e); err != nil {
			return err
		}
	}
	return nil
}
