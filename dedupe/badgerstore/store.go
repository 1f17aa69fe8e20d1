package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// Store is the embedded default dedupe.Ledger, backed by a Badger database.
//
// Event records carry Badger TTLs, so expired claims and dedupe records are
// dropped by Badger itself. Entity versions do too (Claim.VersionTTL, from
// their last advance, version_record.go): a version must outlive any dedupe
// window to keep rejecting stale deliveries, but kept for good the store
// would grow with every entity ever seen.
//
// The same database is the Outbox of async mode (outbox.go).
type Store struct {
	db  *badger.DB
	dir string
	// use keeps Close from closing the database under a reader (inuse.go).
	use inUse
	// failed is set by the first write that fails; the store then refuses
	// everything (failure.go).
	failed *failure
	gc     *background
	// advice keeps Badger's maps of the ledger files read at random (readahead.go).
	advice *background
	// rewriting reports whether a value-log rewrite is past its start (gc.go);
	// nil if this Badger does not say.
	rewriting func() bool
	// rewrites lets one value-log rewrite or prefix drop run at a time: a
	// rewrite writes beside the committer once started (gc.go), and a drop
	// (reclaim.go), which keeps only the committer out, must not swap the
	// memtable under a rewrite's write-back. Taken before the committer's lock.
	rewrites sync.Mutex
	// commits is the only writer (commit.go).
	commits *committer
	// leasing holds a one-slot channel per namespace, the turn to Lease.
	leasing sync.Map
	// floors is where each namespace's Lease scan starts (outbox_floor.go).
	floors dueFloors
	// leases are the Outbox's leases, held in memory (outbox_leases.go).
	leases *leaseTable
	// claims are sync mode's claims in flight (claims.go).
	claims *claimTable
	// pending is each namespace's backlog of undelivered events (outbox_pending.go).
	pending pendingCounts
	// clock is the time the store compares leases and expiries with: time.Now, but for the
	// tests of exact expiry, which set it so that their checks do not race the wall clock.
	clock func() time.Time
}

// Open opens (creating) a Badger database in dir with a small,
// gateway-sized profile (options.go). Writes are group-committed: concurrent
// Claims, Accepts, Dones, ... share one transaction and one sync, and each
// returns once its write is synced (commit.go). A background goroutine
// reclaims value-log space (gc.go) until Close, and another has the ledger
// files' maps read at random (readahead.go).
//
// Leases are held in memory (outbox_leases.go), so the events that were
// leased when the directory was last closed are due as they were before:
// Badger locks its directory, so the process that leased them is gone. Those
// that an earlier version wrote as leased are made due at once
// (outbox_recover.go).
func Open(dir string) (*Store, error) {
	return openBadger(dir, nil)
}

// Reopen opens the directory of previous, a store of this process that
// failed and has been closed, again. Unlike Open it leaves the events
// previous leased to their leases (it takes over previous's lease table),
// since this process's deliverers may still be sending them, and it keeps
// previous's sync-mode claims, since their requests may still be with the
// app: neither is handed out twice.
func Reopen(previous *Store) (*Store, error) {
	return openBadger(previous.dir, previous)
}

// openBadger is Open (previous nil) or Reopen.
func openBadger(dir string, previous *Store) (*Store, error) {
	failed := &failure{}
	log := &storeLogger{failed: failed}
	db, err := badger.Open(badgerOptions(dir).WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("dedupe: open %s: %w", dir, lockError(err))
	}
	b := &Store{db: db, dir: dir, failed: failed, claims: &claimTable{}, leases: &leaseTable{}, clock: time.Now}
	if flag := rewriteFlag(db); flag != nil {
		b.rewriting = flag.Load
	}
	b.commits = startCommitter(db, failed, b.settled)
	if previous != nil {
		b.claims, b.leases = previous.claims, previous.leases
	} else if err := b.recoverLeases(b.clock()); err != nil {
		b.closeWriter()
		db.Close()
		return nil, fmt.Errorf("dedupe: open %s: %w", dir, err)
	}
	if err := b.countPending(); err != nil {
		b.closeWriter()
		db.Close()
		return nil, fmt.Errorf("dedupe: open %s: counting the backlog: %w", dir, err)
	}
	b.gc = startCollector(b.collectGarbage, log)
	b.advice = startAdviser(dir, log)
	return b, nil
}

// Claim implements dedupe.Ledger. The claim itself is held in memory (claims.go)
// and the ledger is only read, so a Claim costs no write and no sync. It
// takes the claim before reading, so of concurrent Claims of one ID only the
// first reads and the others are InFlight; it gives the claim back if the
// ID turns out done or the version stale. It reads the snapshot published
// after the last commit, once the queued or in-flight writes of its keys are
// in it (claim_read.go), so it does not wait for an unrelated group's sync.
// On error the Outcome is meaningless.
func (b *Store) Claim(ctx context.Context, c dedupe.Claim) (dedupe.Outcome, error) {
	if c.ID != "" && c.Lease <= 0 {
		return 0, fmt.Errorf("dedupe: claim: lease must be positive, got %v", c.Lease)
	}
	ids, vk, err := keys(c)
	if err != nil {
		return 0, fmt.Errorf("dedupe: claim: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("dedupe: claim: %w", err)
	}
	if err := b.failed.get(); err != nil {
		return 0, fmt.Errorf("dedupe: claim: %w", err)
	}
	now := b.clock()
	if !b.claims.takeAll(ids, now, now.Add(c.Lease)) {
		return dedupe.InFlight, nil
	}
	var out dedupe.Outcome
	err = b.readClaim(ctx, ids, vk, func(txn *badger.Txn) error {
		var err error
		if out, err = idOutcome(txn, ids, now); err != nil || out != dedupe.Claimed {
			return err
		}
		out, err = versionOutcome(txn, vk, c.Version)
		return err
	})
	if err != nil || out != dedupe.Claimed {
		b.claims.dropAll(ids)
	}
	if errors.Is(err, badger.ErrDBClosed) {
		err = errClosed
	}
	if err != nil {
		return 0, fmt.Errorf("dedupe: claim: %w", redact(err))
	}
	return out, nil
}

// Done implements dedupe.Ledger. The ID is marked done even if this caller's lease
// had expired and another request took the claim over: the work was done, and
// recording it keeps later retries from repeating it. ctx is honoured, so a
// caller that must record completion after its request was cancelled should
// pass context.WithoutCancel.
func (b *Store) Done(ctx context.Context, c dedupe.Claim, ttl time.Duration) error {
	if c.ID != "" && ttl <= 0 {
		return fmt.Errorf("dedupe: done: ttl must be positive, got %v", ttl)
	}
	ids, vk, err := keys(c)
	if err != nil {
		return fmt.Errorf("dedupe: done: %w", err)
	}
	if ids == nil && vk == nil {
		return nil
	}
	err = b.write(ctx, "done", b.declare(ids, vk), func(txn *badger.Txn) error {
		if err := markDone(txn, ids, b.clock().Add(ttl)); err != nil {
			return err
		}
		if vk == nil {
			return nil
		}
		// Writes are applied one at a time (commit.go), so this compares
		// against the newest version and never moves it backwards.
		stored, ok, err := getVersion(txn, vk)
		if err != nil || (ok && c.Version <= stored) {
			return err
		}
		return txn.SetEntry(versionEntry(vk, c.Version, c.VersionTTL))
	})
	if err == nil {
		b.claims.dropAll(ids)
	}
	return err
}

// Release implements dedupe.Ledger. Claims carry no owner, so a caller whose lease
// expired and was taken over releases the newer claim too; that only lets
// one more delivery of the ID through, which at-least-once delivery allows.
func (b *Store) Release(ctx context.Context, c dedupe.Claim) error {
	ids, _, err := keys(c)
	if err != nil {
		return fmt.Errorf("dedupe: release: %w", err)
	}
	b.claims.dropAll(ids)
	return nil
}

// Close implements dedupe.Ledger. Operations in progress finish first, and writes
// already queued are committed, so their callers get their outcome; later
// ones fail. Then it flushes and closes the database; calling it again is
// harmless.
func (b *Store) Close() error {
	b.use.close()
	b.closeWriter()
	b.gc.close()
	b.advice.close()
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("dedupe: close: %w", err)
	}
	return nil
}

// settled is told of every write transaction once it is committed or discarded.
func (b *Store) settled(txn *badger.Txn, committed bool) {
	b.pending.settle(txn, committed)
	b.floors.settle(txn)
}

// closeWriter stops the committer once its queue is committed.
func (b *Store) closeWriter() {
	b.commits.close()
}

// update runs fn as one atomic write that is synced when update returns,
// and wraps errors with op, without the key or value bytes Badger may have
// put in them. fn may run more than once and must set its results afresh
// each time; it runs on the committer, so it must not call back into the
// store. fn must write none of the keys Claims read (event IDs, digests and
// entity versions): Claims read a snapshot without waiting for it
// (commit_writes.go). Done and Accept, which write them, use write.
func (b *Store) update(ctx context.Context, op string, fn func(*badger.Txn) error) error {
	return b.write(ctx, op, claimKeys{}, fn)
}

// write is update of an fn that writes, of the keys Claims read, those in ks.
func (b *Store) write(ctx context.Context, op string, ks claimKeys, fn func(*badger.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dedupe: %s: %w", op, err)
	}
	if err := b.failed.get(); err != nil {
		return fmt.Errorf("dedupe: %s: %w", op, err)
	}
	err := b.use.enter()
	if err == nil {
		err = b.commits.do(ctx, ks, fn)
		b.use.leave()
	}
	if err != nil {
		return fmt.Errorf("dedupe: %s: %w", op, redact(err))
	}
	return nil
}

// keys returns the keys that deduplicate c (its event ID's, then its digest's if it has one)
// and its version key; nil for the parts it leaves off.
func keys(c dedupe.Claim) (ids [][]byte, version []byte, err error) {
	if c.ID != "" {
		event, err := key(c.Namespace, kindEvent, c.ID)
		if err != nil {
			return nil, nil, err
		}
		ids = append(ids, event)
		if c.Digest != "" {
			digest, err := key(c.Namespace, kindDigest, c.Digest)
			if err != nil {
				return nil, nil, err
			}
			ids = append(ids, digest)
		}
	}
	if c.Entity != "" {
		if version, err = key(c.Namespace, kindVersion, c.Entity); err != nil {
			return nil, nil, err
		}
	}
	return ids, version, nil
}

// getEvent returns the state of a live event record, or 0 if there is none
// or it has expired.
func getEvent(txn *badger.Txn, k []byte, now time.Time) (byte, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var state byte
	var live bool
	err = item.Value(func(v []byte) error {
		state, live, err = parseEventValue(v, now)
		return err
	})
	if err != nil || !live {
		return 0, err
	}
	if state != stateDone {
		return 0, fmt.Errorf("unknown event state %d", state)
	}
	return state, nil
}

// getVersion returns the stored version of an entity and whether there is one.
func getVersion(txn *badger.Txn, k []byte) (int64, bool, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var version int64
	err = item.Value(func(v []byte) error {
		version, err = parseVersionValue(v)
		return err
	})
	return version, err == nil, err
}

// expiringEntry sets Badger's whole-second expiry one second past the exact
// one, so Badger never drops the record early; until then the exact expiry
// stored in the value decides.
func expiringEntry(k, v []byte, expires time.Time) *badger.Entry {
	e := badger.NewEntry(k, v)
	e.ExpiresAt = uint64(expires.Unix()) + 1
	return e
}

var _ dedupe.Ledger = (*Store)(nil)

// idOutcome is what the ledger holds of an event's dedupe keys (keys): Duplicate if any is done,
// or Claimed when all are new. No keys (dedupe off) is always new. Claims in flight are in memory
// (claims.go).
func idOutcome(txn *badger.Txn, ids [][]byte, now time.Time) (dedupe.Outcome, error) {
	for _, k := range ids {
		switch state, err := getEvent(txn, k, now); {
		case err != nil:
			return 0, err
		case state == stateDone:
			return dedupe.Duplicate, nil
		}
	}
	return dedupe.Claimed, nil
}

// markDone records every dedupe key of an event as done until expires.
func markDone(txn *badger.Txn, ids [][]byte, expires time.Time) error {
	for _, k := range ids {
		if err := txn.SetEntry(expiringEntry(k, eventValue(stateDone, expires), expires)); err != nil {
			return err
		}
	}
	return nil
}

// versionOutcome is Stale when version is not newer than the entity's stored one, else Claimed.
// A nil key (versions off) is never stale.
func versionOutcome(txn *badger.Txn, vk []byte, version int64) (dedupe.Outcome, error) {
	if vk == nil {
		return dedupe.Claimed, nil
	}
	stored, found, err := getVersion(txn, vk)
	if err != nil {
		return 0, err
	}
	if found && version <= stored {
		return dedupe.Stale, nil
	}
	return dedupe.Claimed, nil
}
