package badgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
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
	if strings.IndexByte(namespace, 0) >= 0 {
		return nil, fmt.Errorf("%w: %q", errNamespaceNUL, namespace)
	}
	k := make([]byte, 0, len(namespace)+3+len(rest))
	k = append(k, namespace...)
	k = append(k, 0, kind, 0)
	return append(k, rest...), nil
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
