package badgerstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// Outbox key kinds, in the same "<namespace>\x00<kind>\x00<rest>" scheme as
// the ledger's (see key). A queued event is split in two records so that the
// frequent rewrites of its delivery state (every Lease and Update) never copy
// its body, which can be up to a MiB and lives in Badger's value log:
//
//	"<ns>\x00o\x00<id>"                          delivery state (outboxRecord), small, rewritten per attempt
//	"<ns>\x00b\x00<id>"                          the request as accepted (payload), written on Accept, again only to change its TTL
//	"<ns>\x00q\x00<8-byte due nanos><id>"        due index of Pending events, empty value
//	"<ns>\x00s\x00<state>\x00<8-byte nanos><id>" state index by accept time, empty value
//	"<ns>\x00d\x00<entity>"                      newest delivered version, as versionValue
//	"<ns>\x00l\x00<id>"                          leased index: events handed out and not yet updated, empty value (earlier versions)
//
// The leased index is what recovery at open reads (outbox_recover.go), instead of every key; the
// earlier versions that wrote leases to disk wrote and deleted it in the transactions that set
// and cleared a record's Leased. Leases are held in memory now (outbox_leases.go): an Update
// still deletes the entry of an event leased by an earlier version.
//
// The accepted version of an entity is the ledger's own version record
// ('v'), so sync and async routes of one namespace agree on staleness.
const (
	kindOutbox    = 'o'
	kindPayload   = 'b'
	kindDue       = 'q'
	kindState     = 's'
	kindDelivered = 'd'
	kindLeased    = 'l'
)

// nanosLen is the length of the big-endian time prefix in index keys.
const nanosLen = 8

// outboxKeys are the two record keys of one queued event.
type outboxKeys struct {
	ns, id          string
	record, payload []byte
}

// keysFor is the event's two record keys, made in one allocation: every Accept, Update, Get and
// leased event makes them.
func keysFor(namespace, id string) (outboxKeys, error) {
	if id == "" {
		return outboxKeys{}, fmt.Errorf("empty event ID")
	}
	if err := checkNamespace(namespace); err != nil {
		return outboxKeys{}, err
	}
	// The request is stored once, under the route, for all its destinations' queues.
	route := routeOf(namespace)
	n, m := keyLen(namespace, id), keyLen(route, id)
	both := make([]byte, 0, n+m)
	rec := appendKey(both, namespace, kindOutbox, id)
	pay := appendKey(both[n:n], route, kindPayload, id)
	return outboxKeys{ns: namespace, id: id, record: rec[:n:n], payload: pay}, nil
}

// due is the due-index key of the event at t.
func (k outboxKeys) due(t time.Time) []byte {
	return indexKey(k.ns, kindDue, "", t, k.id)
}

// leased is the event's key in the leased index.
func (k outboxKeys) leased() []byte {
	lk, _ := key(k.ns, kindLeased, k.id) // namespace already checked
	return lk
}

// setLeased adds the event to the leased index or takes it out, when that changes.
func (k outboxKeys) setLeased(txn *badger.Txn, was, is bool) error {
	switch {
	case is && !was:
		return txn.Set(k.leased(), nil)
	case was && !is:
		return txn.Delete(k.leased())
	}
	return nil
}

// state is the state-index key of the event in state s, accepted at t.
func (k outboxKeys) state(s dedupe.State, t time.Time) []byte {
	return indexKey(k.ns, kindState, string(s)+"\x00", t, k.id)
}

// indexKey is "<ns>\x00<kind>\x00<sub><8-byte nanos of t><id>"; the namespace
// must already have been checked for NUL bytes.
func indexKey(namespace string, kind byte, sub string, t time.Time, id string) []byte {
	k := make([]byte, 0, len(namespace)+3+len(sub)+nanosLen+len(id))
	k = append(k, namespace...)
	k = append(k, 0, kind, 0)
	k = append(k, sub...)
	k = binary.BigEndian.AppendUint64(k, sortNanos(t))
	return append(k, id...)
}

// splitIndexKey returns the time and ID of an index key under prefix.
func splitIndexKey(k []byte, prefixLen int) (uint64, string, error) {
	if len(k) <= prefixLen+nanosLen {
		return 0, "", fmt.Errorf("corrupt index key %q", k)
	}
	rest := k[prefixLen:]
	return binary.BigEndian.Uint64(rest), string(rest[nanosLen:]), nil
}

// maxNanosTime is the last time that Unix nanoseconds in an int64 cover.
var maxNanosTime = time.Unix(0, math.MaxInt64)

// sortNanos maps t to Unix nanoseconds that sort like t, clamping times
// before 1970 to 0 and times past 2262 (where UnixNano is undefined) to the
// maximum, so any time.Time gives a well-ordered index key.
func sortNanos(t time.Time) uint64 {
	switch {
	case t.Before(time.Unix(0, 0)):
		return 0
	case t.After(maxNanosTime):
		return math.MaxInt64
	}
	return uint64(t.UnixNano())
}

// validState reports whether s is one of the four states.
func validState(s dedupe.State) bool {
	switch s {
	case dedupe.Pending, dedupe.Delivered, dedupe.Dead, dedupe.Superseded:
		return true
	}
	return false
}

// final reports whether s is a state that is kept only for a while.
func final(s dedupe.State) bool { return s != dedupe.Pending }

// keyIterator walks the keys under prefix (all keys for nil) without prefetching values: the
// scans of this package read the few values they need themselves.
func keyIterator(txn *badger.Txn, prefix []byte) *badger.Iterator {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	return txn.NewIterator(opts)
}
