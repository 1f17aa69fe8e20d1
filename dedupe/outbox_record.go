package dedupe

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// outboxRecord is the mutable delivery state of a queued event. Its value is
// an 8-byte big-endian exact expiry in Unix nanos (0 = none) and then the
// JSON. The exact expiry decides, as for the ledger's event records, because
// Badger's TTL is whole seconds; the Badger TTL (see expiringEntry) only
// reclaims the space a second later.
type outboxRecord struct {
	State       State     `json:"state"`
	Attempts    int       `json:"attempts,omitempty"`
	NextAttempt time.Time `json:"next_attempt,omitzero"`
	LastStatus  int       `json:"last_status,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	AcceptedAt  time.Time `json:"accepted_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Leased marks a Pending event handed out by Lease and not yet updated: at open, such a
	// lease can only belong to a process that died (see recoverLeases).
	Leased bool `json:"leased,omitempty"`

	// encoded, when set, is the JSON of the fields above, made before the
	// transaction: writes are applied one at a time (commit.go), so
	// encoding in the caller, in parallel, shortens the queue. Set it only
	// once the fields are final.
	encoded []byte
}

// payload is the request as accepted. Its value is a uvarint length, that
// many bytes of JSON, and then the raw body, so a MiB body is stored as a
// MiB, not as 1.33 MiB of base64. Once the event is delivered or superseded
// the body is dropped (see shed) and only its size is kept.
type payload struct {
	Entity    string      `json:"entity,omitempty"`
	Version   int64       `json:"version,omitempty"`
	Method    string      `json:"method"`
	URI       string      `json:"uri"`
	Header    http.Header `json:"header,omitempty"`
	Scheme    string      `json:"scheme,omitempty"`
	BodyBytes int         `json:"body_bytes"`
	body      []byte
}

func payloadOf(ev *Event) *payload {
	return &payload{
		Entity: ev.Entity, Version: ev.Version, Method: ev.Method, URI: ev.URI,
		Header: ev.Header, Scheme: ev.Scheme, BodyBytes: len(ev.Body), body: ev.Body,
	}
}

func (p *payload) encode() ([]byte, error) {
	meta, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding event: %w", err)
	}
	v := make([]byte, 0, binary.MaxVarintLen64+len(meta)+len(p.body))
	v = binary.AppendUvarint(v, uint64(len(meta)))
	v = append(v, meta...)
	return append(v, p.body...), nil
}

// decodePayload decodes v, which the payload then owns (the body aliases it).
func decodePayload(v []byte) (*payload, error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || n > uint64(len(v)-w) {
		return nil, fmt.Errorf("corrupt event payload of %d bytes", len(v))
	}
	p := new(payload)
	if err := json.Unmarshal(v[w:w+int(n)], p); err != nil {
		return nil, fmt.Errorf("corrupt event payload: %w", err)
	}
	if body := v[w+int(n):]; len(body) > 0 {
		p.body = body
	}
	return p, nil
}

// event assembles the Event the Outbox hands out.
func (k outboxKeys) event(r *outboxRecord, p *payload) *Event {
	return &Event{
		Namespace: k.ns, ID: k.id,
		Entity: p.Entity, Version: p.Version, Method: p.Method, URI: p.URI,
		Header: p.Header, Body: p.body, BodyBytes: p.BodyBytes, Scheme: p.Scheme,
		State: r.State, Attempts: r.Attempts, NextAttempt: r.NextAttempt,
		LastStatus: r.LastStatus, LastError: r.LastError,
		AcceptedAt: r.AcceptedAt, UpdatedAt: r.UpdatedAt,
	}
}

// getRecord reads the delivery state of an event. live is false when there
// is none or its exact expiry has passed; rec is still returned in the
// latter case so its index entries can be cleaned up.
func getRecord(txn *badger.Txn, k []byte, now time.Time) (rec *outboxRecord, live bool, err error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var expires int64
	err = item.Value(func(v []byte) error {
		if len(v) < nanosLen {
			return fmt.Errorf("corrupt event record of %d bytes", len(v))
		}
		expires = int64(binary.BigEndian.Uint64(v))
		rec = new(outboxRecord)
		if err := json.Unmarshal(v[nanosLen:], rec); err != nil {
			return fmt.Errorf("corrupt event record: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return rec, expires == 0 || now.UnixNano() < expires, nil
}

// putRecord writes the delivery state; a zero expires means it never expires.
func putRecord(txn *badger.Txn, k []byte, rec *outboxRecord, expires time.Time) error {
	js := rec.encoded
	if js == nil {
		var err error
		if js, err = json.Marshal(rec); err != nil {
			return fmt.Errorf("encoding event record: %w", err)
		}
	}
	v := make([]byte, nanosLen, nanosLen+len(js))
	if !expires.IsZero() {
		binary.BigEndian.PutUint64(v, uint64(expires.UnixNano()))
	}
	return txn.SetEntry(entry(k, append(v, js...), expires))
}

// getPayload reads the request of an event whose record is live.
func getPayload(txn *badger.Txn, k []byte) (*payload, error) {
	v, err := payloadBytes(txn, k)
	if err != nil {
		return nil, err
	}
	return decodePayload(v)
}

// retain rewrites the payload with a new expiry (zero: none) and returns it.
// Badger keeps a TTL per written version, so changing it means writing the
// value again; this happens once when an event dies and once per Replay.
func retain(txn *badger.Txn, k []byte, expires time.Time) (*payload, error) {
	v, err := payloadBytes(txn, k)
	if err != nil {
		return nil, err
	}
	if err := txn.SetEntry(entry(k, v, expires)); err != nil {
		return nil, err
	}
	return decodePayload(v)
}

// shed rewrites the payload without its body, expiring at expires, and
// returns it as it was. A delivered or superseded event is never sent again,
// so keeping its body for the listing period would only double the value
// log's writes and hold a KiB or more per event on disk: at 100 events/s
// over the default 24h keep, 8 GiB.
func shed(txn *badger.Txn, k []byte, expires time.Time) (*payload, error) {
	p, err := getPayload(txn, k)
	if err != nil {
		return nil, err
	}
	meta := *p
	meta.body = nil
	v, err := meta.encode()
	if err != nil {
		return nil, err
	}
	return p, txn.SetEntry(entry(k, v, expires))
}

// payloadBytes copies out the stored payload of an event whose record is live.
func payloadBytes(txn *badger.Txn, k []byte) ([]byte, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("event record without payload %q", k)
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// entry is an entry without TTL when expires is zero, else an expiringEntry.
func entry(k, v []byte, expires time.Time) *badger.Entry {
	if expires.IsZero() {
		return badger.NewEntry(k, v)
	}
	return expiringEntry(k, v, expires)
}
