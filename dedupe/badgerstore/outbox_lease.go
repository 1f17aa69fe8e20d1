package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// Lease implements dedupe.Outbox. It reads the namespace's due index, which sorts by due
// time, from the floor up to now, so its cost is the number of events it hands out, not the size
// of the queue; and it writes nothing: leases are held in memory (outbox_leases.go), and an
// event's record keeps its due time until its holder's Update. Events whose lease lapsed are
// found in the lease table and handed out again with the due ones, by due time (a lapsed
// lease's is its end).
//
// An event is never handed to two callers within its lease: the lease table takes each one for
// one caller only, and only if no Update ended a lease of it since the scan's snapshot. Leases
// of one namespace also take turns (Badger locks its directory, so every caller is in this
// process): concurrent ones would all want the same head of the queue.
//
// An index entry that does not match its record, such as the lease expiry of an event leased by
// an earlier version and delivered within its lease, is deleted after the scan in a write of its
// own. Thousands of those can come due at once, and a caller can ask for thousands of events, so
// the work of one scan is bounded (outbox_lease_budget.go): a call goes on in further scans, a
// bounded number of them, and may hand out fewer than n events while more are due; the next
// call carries on from where it stopped.
func (b *Store) Lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
	turn, ok := b.leasing.Load(namespace)
	if !ok {
		turn, _ = b.leasing.LoadOrStore(namespace, make(chan struct{}, 1))
	}
	select {
	case turn.(chan struct{}) <- struct{}{}:
		defer func() { <-turn.(chan struct{}) }()
	case <-ctx.Done():
		return nil, fmt.Errorf("dedupe: lease: %w", ctx.Err())
	}
	return b.lease(ctx, namespace, now, n, lease)
}

// lease is Lease without taking turns, safe all the same. It leases in rounds of one bounded
// scan each (leaseRound), until it has n events, reaches the events due at now, or has done
// leaseRounds, so that a call's work is bounded too. Events already leased when a later round
// fails are handed out all the same, as a lease taken must be; the next call meets the error
// again.
func (b *Store) lease(ctx context.Context, namespace string, now time.Time, n int, lease time.Duration) ([]*dedupe.Event, error) {
	if lease <= 0 {
		return nil, fmt.Errorf("dedupe: lease: lease must be positive, got %v", lease)
	}
	prefix, err := key(namespace, kindDue, "")
	if err != nil {
		return nil, fmt.Errorf("dedupe: lease: %w", err)
	}
	if n <= 0 {
		return nil, nil
	}
	var out []*dedupe.Event
	bodies := 0
	for round := range leaseRounds {
		if len(out) == n || bodies >= leaseBytes || (round > 0 && ctx.Err() != nil) {
			break
		}
		evs, cut, err := b.leaseRound(ctx, namespace, prefix, now, n-len(out), leaseBytes-bodies, now.Add(lease))
		if err != nil {
			if len(out) > 0 {
				break
			}
			return nil, err
		}
		out = append(out, evs...)
		for _, ev := range evs {
			bodies += len(ev.Body)
		}
		if !cut {
			break
		}
	}
	return out, nil
}

// leaseRound leases up to n events due at or before now until then, stopping once their bodies
// reach maxBodies (the first always goes): those it finds in one
// bounded scan of the due index (scanDue) and those whose lease lapsed, earliest due first. It
// deletes the stale entries the scan walked past. cut says the scan stopped at its bounds, with
// entries due at now still beyond.
func (b *Store) leaseRound(ctx context.Context, namespace string, prefix []byte, now time.Time, n, maxBodies int, until time.Time) (out []*dedupe.Event, cut bool, err error) {
	from := b.floors.start(namespace, b.clock())
	seq := b.leases.beginScan(namespace)
	var floor string // where the next scan starts: unchanged unless this one succeeds
	defer func() {
		b.leases.endScan(namespace)
		b.floors.done(namespace, floor)
	}()
	lapsed := b.leases.lapsed(namespace, now, n)
	var scan dueScan
	var picks []leasePick
	err = b.view(ctx, "lease", func(txn *badger.Txn) error {
		clock := b.clock()
		held := func(id string) bool { return b.leases.held(namespace, id) }
		var err error
		if scan, err = scanDue(txn, namespace, prefix, from, sortNanos(now), n, clock, held); err != nil {
			return err
		}
		picks, err = pickDue(txn, namespace, scan.due, lapsed, n, maxBodies, clock)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if err := b.dropStale(ctx, namespace, scan.stale); err != nil {
		return nil, false, err
	}
	floor = scan.earliest
	taken := 0
	// The events share one allocation: they are handed out and dropped together, and the
	// bodies, which the deliverer lets go one by one, are not in it.
	events := make([]dedupe.Event, 0, len(picks))
	for _, p := range picks {
		if p.fromScan {
			taken++
		}
		if p.rec == nil {
			b.leases.forget(namespace, p.keys.id, p.token)
			continue
		}
		token, ok := b.leases.take(namespace, p.keys.id, p.token, seq, until)
		if !ok {
			continue
		}
		events = append(events, *p.keys.event(p.rec, p.payload))
		ev := &events[len(events)-1]
		ev.NextAttempt, ev.LeaseToken = until, token
		out = append(out, ev)
	}
	if taken < len(scan.due) {
		floor = min(floor, scan.due[taken].floor)
	}
	return out, scan.cut, nil
}

// leasePick is an event a Lease hands out if the lease table lets it: one found due by the scan
// (token 0), or one whose lease with token lapsed. A lapsed one whose record is no longer
// Pending has a nil rec: its lease is forgotten.
type leasePick struct {
	keys     outboxKeys
	token    uint64
	fromScan bool
	rec      *outboxRecord
	payload  *payload
}

// pickDue merges the events the scan found due with the lapsed leases, both earliest first, into
// up to n picks, and reads their records and payloads, until these hold maxBodies of bodies.
func pickDue(txn *badger.Txn, namespace string, due []dueEvent, lapsed []lapsedLease, n, maxBodies int, clock time.Time) ([]leasePick, error) {
	var picks []leasePick
	bodies := 0
	for len(picks) < n && bodies < maxBodies && (len(due) > 0 || len(lapsed) > 0) {
		var p leasePick
		if len(lapsed) == 0 || (len(due) > 0 && dueFirst(due[0], lapsed[0])) {
			p = leasePick{keys: due[0].keys, fromScan: true, rec: due[0].rec}
			due = due[1:]
		} else {
			ok, err := keysFor(namespace, lapsed[0].id)
			if err != nil {
				return nil, err
			}
			p = leasePick{keys: ok, token: lapsed[0].token}
			lapsed = lapsed[1:]
			rec, live, err := getRecord(txn, ok.record, clock)
			if err != nil {
				return nil, err
			}
			if live && rec.State == dedupe.Pending {
				p.rec = rec
			}
		}
		if p.rec != nil {
			var err error
			if p.payload, err = getPayload(txn, p.keys.payload); err != nil {
				return nil, err
			}
			bodies += len(p.payload.body)
		}
		picks = append(picks, p)
	}
	return picks, nil
}

// dueFirst says whether d sorts before l, as their due entries would: by due time, then ID.
func dueFirst(d dueEvent, l lapsedLease) bool {
	at := sortNanos(l.until)
	return d.at < at || (d.at == at && d.keys.id < l.id)
}

// dropStale deletes the due entries a scan found not to match their records, if they still do
// not: a record may have been written since the scan's snapshot.
func (b *Store) dropStale(ctx context.Context, namespace string, stale [][]byte) error {
	if len(stale) == 0 {
		return nil
	}
	prefix, _ := key(namespace, kindDue, "") // namespace already checked
	return b.update(ctx, "lease", func(txn *badger.Txn) error {
		for _, k := range stale {
			at, id, err := splitIndexKey(k, len(prefix))
			if err != nil {
				return err
			}
			ok, err := keysFor(namespace, id)
			if err != nil {
				return err
			}
			rec, live, err := getRecord(txn, ok.record, b.clock())
			if err != nil {
				return err
			}
			if live && rec.State == dedupe.Pending && sortNanos(rec.NextAttempt) == at {
				continue
			}
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// dueEvent is a Pending event found in the due index.
type dueEvent struct {
	at    uint64 // its due time (sortNanos)
	floor string // its entry's key after the prefix, a floor at it
	keys  outboxKeys
	rec   *outboxRecord
}

// dueScan is what scanDue found.
type dueScan struct {
	due   []dueEvent // events to lease, in due order
	stale [][]byte   // due-index keys found not to match their record, to delete
	// earliest is where the earliest entry the scan leaves in place is (a floor just past the
	// limit when it found none), passing over those of leased events and stale ones: the floor, once the
	// stale ones are deleted.
	earliest string
	cut      bool // stopped at the bounds of one scan, before the limit
}

// scanDue finds up to n events due at or before the limit (sortNanos), starting at from, and
// the stale entries before them, as many as one scan's bounds take (outbox_lease_budget.go).
// It passes over the entries of events held in the lease table (held). Records expired at clock
// are stale.
func scanDue(txn *badger.Txn, namespace string, prefix []byte, from string, limit uint64, n int, clock time.Time, held func(id string) bool) (dueScan, error) {
	it := keyIterator(txn, prefix)
	defer it.Close()
	// Past the limit: every entry at or before it is walked (entries due at it too).
	limitFloor := string(binary.BigEndian.AppendUint64(nil, limit+1))
	scan := dueScan{earliest: limitFloor}
	var budget txnBudget
	passed := 0
	for it.Seek(seekKey(prefix, from)); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) <= len(prefix)+nanosLen {
			return dueScan{}, fmt.Errorf("corrupt index key %q", k)
		}
		// The entry's floor (its key after the prefix) ends with its ID: one string for both.
		here := string(k[len(prefix):])
		at, id := binary.BigEndian.Uint64(k[len(prefix):]), here[nanosLen:]
		if at > limit {
			scan.earliest = limitFloor
			break
		}
		if len(scan.due) == n {
			scan.earliest = here
			break
		}
		if passed == leaseWalk {
			scan.earliest, scan.cut = here, true
			break
		}
		if held(id) {
			passed++
			continue
		}
		ok, err := keysFor(namespace, id)
		if err != nil {
			return dueScan{}, err
		}
		rec, live, err := getRecord(txn, ok.record, clock)
		if err != nil {
			return dueScan{}, err
		}
		if !live || rec.State != dedupe.Pending || sortNanos(rec.NextAttempt) != at {
			if len(scan.stale) == leaseDeletes || !budget.take(deleteSize(k)) {
				scan.earliest, scan.cut = here, true
				break
			}
			scan.stale = append(scan.stale, bytes.Clone(k))
			passed++
			continue
		}
		if len(scan.due) == leaseEvents {
			scan.earliest, scan.cut = here, true
			break
		}
		scan.due = append(scan.due, dueEvent{at: at, floor: here, keys: ok, rec: rec})
	}
	return scan, nil
}
