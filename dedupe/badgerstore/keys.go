package badgerstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Key kinds. A key is "<namespace>\x00<kind>\x00<rest>": the namespace holds
// no NUL, so the first NUL ends it and IDs or entities may contain any bytes.
const (
	kindEvent   = 'e'
	kindDigest  = 'h' // an event's signed-bytes digest, recorded as an event ID is
	kindVersion = 'v'
)

// stateDone is the first byte of an event value: the ID was processed. (1
// was a claim, before claims moved to memory.)
const stateDone byte = 2

// eventValueLen is one state byte plus the expiry in big-endian Unix nanos.
const eventValueLen = 1 + 8

var errNamespaceNUL = errors.New("namespace contains a NUL byte")

func key(namespace string, kind byte, rest string) ([]byte, error) {
	if err := checkNamespace(namespace); err != nil {
		return nil, err
	}
	return appendKey(make([]byte, 0, keyLen(namespace, rest)), namespace, kind, rest), nil
}

// checkNamespace refuses a namespace that holds a NUL, which would end it early in a key, but
// for the one that joins a route and a destination in a queue's namespace
// (dedupe.QueueNamespace): a queue's keys are "<route>\x00@<destination>\x00<kind>\x00<rest>",
// and '@' is no kind, so they never read as one of the route's own.
func checkNamespace(namespace string) error {
	route, destination := dedupe.SplitQueueNamespace(namespace)
	if strings.IndexByte(route, 0) >= 0 {
		return fmt.Errorf("%w: %q", errNamespaceNUL, namespace)
	}
	if destination != dedupe.DefaultDestination || route != namespace {
		if err := dedupe.CheckDestinationName(destination); err != nil {
			return fmt.Errorf("queue %q: %w", namespace, err)
		}
	}
	return nil
}

// routeOf is the route a checked namespace belongs to: the namespace itself, or a queue's route.
func routeOf(namespace string) string {
	route, _ := dedupe.SplitQueueNamespace(namespace)
	return route
}

// namespaceOf is the namespace of one of this package's keys: a route's, or a destination's
// queue's. A route's queues' keys sort before its own ('@' before every kind), so a walk meets
// them first.
func namespaceOf(k []byte) (string, bool) {
	route, rest, ok := bytes.Cut(k, []byte{0})
	if !ok {
		return "", false
	}
	if len(rest) == 0 || rest[0] != '@' {
		return string(route), true
	}
	name, _, ok := bytes.Cut(rest[1:], []byte{0})
	if !ok {
		return "", false
	}
	return dedupe.QueueNamespace(string(route), string(name)), true
}

// keyLen is the length of a key of namespace and rest.
func keyLen(namespace, rest string) int { return len(namespace) + 3 + len(rest) }

// appendKey appends the key of namespace, kind and rest to dst; the namespace must be checked.
func appendKey(dst []byte, namespace string, kind byte, rest string) []byte {
	dst = append(dst, namespace...)
	dst = append(dst, 0, kind, 0)
	return append(dst, rest...)
}

// eventValue encodes an event record. The expiry is kept to the nanosecond
// because Badger's own TTL is in whole seconds and rounds down, which would
// cut a 1 s lease to anywhere between 0 and 1 s.
func eventValue(state byte, expires time.Time) []byte {
	v := make([]byte, eventValueLen)
	v[0] = state
	binary.BigEndian.PutUint64(v[1:], uint64(expires.UnixNano()))
	return v
}

// parseEventValue decodes an event record; live is false once its expiry has
// passed, in which case the record counts as absent.
func parseEventValue(v []byte, now time.Time) (state byte, live bool, err error) {
	if len(v) != eventValueLen {
		return 0, false, fmt.Errorf("corrupt event record of %d bytes", len(v))
	}
	expires := int64(binary.BigEndian.Uint64(v[1:]))
	return v[0], now.UnixNano() < expires, nil
}

func versionValue(version int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(version))
}

func parseVersionValue(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("corrupt version record of %d bytes", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}
