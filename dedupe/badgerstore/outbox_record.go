package badgerstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"net/http"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

// outboxRecord is the mutable delivery state of a queued event. Its value is
// an 8-byte big-endian exact expiry in Unix nanos (0 = none) and then the
// fields in binary (see encode): a record is rewritten on every attempt and
// read by every Lease, so JSON's encoding and decoding, a few µs each on the
// committer, showed up in the profiles. The exact expiry decides, as for the
// ledger's event records, because Badger's TTL is whole seconds; the Badger
// TTL (see expiringEntry) only reclaims the space a second later.
type outboxRecord struct {
	State       dedupe.State
	Attempts    int
	NextAttempt time.Time
	LastStatus  int
	LastError   string
	AcceptedAt  time.Time
	UpdatedAt   time.Time
	// Leased marks a Pending event that an earlier version handed out and wrote as leased, not
	// yet updated: at open, such a lease can only belong to a process that died (see
	// recoverLeases). Leases are held in memory now (outbox_leases.go), and no longer written.
	Leased bool
	// Leases is the token (Event.LeaseToken) of the holder that last updated the event, which
	// Update must be given while no lease is held in memory (0: never leased); earlier versions
	// kept the count of leases handed out, the number of the latest lease.
	Leases uint64
	// OrderKey, Seq and Holds place an event of an ordered queue (dedupe.Orderer): its key, its
	// place in the route's order, and whether it is a dead head holding its key. A Pending
	// event of a key that is not its key's head waits: its NextAttempt is zero and it has no
	// due entry (outbox_order.go).
	OrderKey string
	Seq      uint64
	Holds    bool
}

// waiting reports whether the record is an ordered event waiting behind its key's head.
func (r *outboxRecord) waiting() bool {
	return r.OrderKey != "" && r.State == dedupe.Pending && r.NextAttempt.IsZero()
}

// recordFormat is the first byte of an encoded record, for a later change of layout. Format 1,
// written before leases were fenced, has no lease count: it decodes as never leased.
const (
	recordFormat         = 2
	recordFormatUnfenced = 1
	// recordFormatOrdered is format 2 with, before the last error, the seq and holds as
	// uvarints and the order key as a uvarint length and its bytes: an event of an ordered
	// queue. Others are written as format 2, as before.
	recordFormatOrdered = 3
)

// maxRecordLen bounds a stored record's value but for its last error: the expiry, the format,
// state and leased bytes, and six varints (see encode).
const maxRecordLen = nanosLen + 3 + 6*binary.MaxVarintLen64

// states numbers the states in a record; 0 is invalid.
var states = [...]dedupe.State{1: dedupe.Pending, 2: dedupe.Delivered, 3: dedupe.Dead, 4: dedupe.Superseded}

// encode appends the record to v: the format byte, the state's number, a
// leased byte, attempts, last status and the lease count as uvarints, the
// three times as varint Unix nanos (0 for a zero time), and the last error
// as the rest.
func (r *outboxRecord) encode(v []byte) ([]byte, error) {
	n := slices.Index(states[:], r.State)
	if n <= 0 {
		return nil, fmt.Errorf("unknown state %q", r.State)
	}
	leased := byte(0)
	if r.Leased {
		leased = 1
	}
	format := byte(recordFormat)
	if r.OrderKey != "" {
		format = recordFormatOrdered
	}
	v = append(v, format, byte(n), leased)
	v = binary.AppendUvarint(v, uint64(r.Attempts))
	v = binary.AppendUvarint(v, uint64(r.LastStatus))
	v = binary.AppendUvarint(v, r.Leases)
	for _, t := range []time.Time{r.AcceptedAt, r.NextAttempt, r.UpdatedAt} {
		var ns int64
		if !t.IsZero() {
			ns = t.UnixNano()
		}
		v = binary.AppendVarint(v, ns)
	}
	if r.OrderKey != "" {
		holds := uint64(0)
		if r.Holds {
			holds = 1
		}
		v = binary.AppendUvarint(binary.AppendUvarint(v, r.Seq), holds)
		v = appendString(v, r.OrderKey)
	}
	return append(v, r.LastError...), nil
}

// decodeRecord is encode's inverse, and decodes format 1 too.
func decodeRecord(v []byte) (*outboxRecord, error) {
	if len(v) < 3 || (v[0] != recordFormat && v[0] != recordFormatUnfenced && v[0] != recordFormatOrdered) || int(v[1]) >= len(states) || v[1] == 0 || v[2] > 1 {
		return nil, fmt.Errorf("corrupt event record of %d bytes", len(v))
	}
	r := &outboxRecord{State: states[v[1]], Leased: v[2] == 1}
	format := v[0]
	counts := 3 // attempts, last status, leases
	if format == recordFormatUnfenced {
		counts = 2
	}
	v = v[3:]
	var nums [3]uint64
	for i := range counts {
		n, w := binary.Uvarint(v)
		if w <= 0 {
			return nil, fmt.Errorf("corrupt event record")
		}
		nums[i], v = n, v[w:]
	}
	r.Attempts, r.LastStatus, r.Leases = int(nums[0]), int(nums[1]), nums[2]
	for _, t := range []*time.Time{&r.AcceptedAt, &r.NextAttempt, &r.UpdatedAt} {
		ns, w := binary.Varint(v)
		if w <= 0 {
			return nil, fmt.Errorf("corrupt event record")
		}
		if ns != 0 {
			*t = time.Unix(0, ns).UTC()
		}
		v = v[w:]
	}
	if format == recordFormatOrdered {
		rd := byteReader{rest: v}
		r.Seq, r.Holds, r.OrderKey = rd.uvarint(), rd.uvarint() == 1, rd.string()
		if rd.failed || r.OrderKey == "" {
			return nil, fmt.Errorf("corrupt event record")
		}
		v = rd.rest
	}
	r.LastError = string(v)
	return r, nil
}

// payload is the request as accepted. Its value is a zero byte, the format, the fields in
// binary (see encode) and then the raw body, so a MiB body is stored as a MiB, and header values
// that are not UTF-8 are kept as they arrived. Once the event is delivered or superseded its
// body and headers are dropped (see shed) and the body's size is kept. The JSON tags are those
// of the earlier format (decodeJSONPayload).
type payload struct {
	Entity    string      `json:"entity,omitempty"`
	Version   int64       `json:"version,omitempty"`
	Method    string      `json:"method"`
	URI       string      `json:"uri"`
	Header    http.Header `json:"header,omitempty"`
	Scheme    string      `json:"scheme,omitempty"`
	BodyBytes int         `json:"body_bytes"`
	// Destinations names the destinations the event was queued for when there were several
	// (format 2): an Update in one queue reads the others' records to tell whether the body is
	// still needed (settlePayload). nil for one destination, which writes format 1.
	Destinations []string `json:"-"`
	body         []byte
}

func payloadOf(ev *dedupe.Event) *payload {
	return &payload{
		Entity: ev.Entity, Version: ev.Version, Method: ev.Method, URI: ev.URI,
		Header: ev.Header, Scheme: ev.Scheme, BodyBytes: len(ev.Body), body: ev.Body,
	}
}

// payloadFormat is the second byte of an encoded payload. The first is 0, which no payload of
// the earlier format starts with: that is the uvarint length of its JSON, never empty. Format 2
// is format 1 with the destinations' names first; an event queued for one destination is
// written as format 1, as before destinations, so a build that predates them reads it.
const (
	payloadFormat             = 1
	payloadFormatDestinations = 2
)

// encode lays the payload out as 0, the format, (in format 2, the number of destinations and
// their names,) the version as a varint and the body's size as a uvarint, then entity, method,
// URI, scheme, the number of header names and each name with its number of values and the
// values (strings as a uvarint length and the bytes), and the body.
func (p *payload) encode() []byte {
	v := make([]byte, 0, p.encodedLen()) // one allocation, of the exact size
	if len(p.Destinations) == 0 {
		v = append(v, 0, payloadFormat)
	} else {
		v = append(v, 0, payloadFormatDestinations)
		v = binary.AppendUvarint(v, uint64(len(p.Destinations)))
		for _, name := range p.Destinations {
			v = appendString(v, name)
		}
	}
	v = binary.AppendVarint(v, p.Version)
	v = binary.AppendUvarint(v, uint64(p.BodyBytes))
	for _, s := range []string{p.Entity, p.Method, p.URI, p.Scheme} {
		v = appendString(v, s)
	}
	v = binary.AppendUvarint(v, uint64(len(p.Header)))
	var sorted [32]string // a request's header names, sorted on the stack unless there are more
	names := sorted[:0]
	for name := range p.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v = appendString(v, name)
		v = binary.AppendUvarint(v, uint64(len(p.Header[name])))
		for _, value := range p.Header[name] {
			v = appendString(v, value)
		}
	}
	return append(v, p.body...)
}

// encodedLen is the length of encode's result.
func (p *payload) encodedLen() int {
	n := 2 + varintLen(p.Version) + uvarintLen(uint64(p.BodyBytes)) + uvarintLen(uint64(len(p.Header))) + len(p.body)
	if len(p.Destinations) > 0 {
		n += uvarintLen(uint64(len(p.Destinations)))
		for _, name := range p.Destinations {
			n += uvarintLen(uint64(len(name))) + len(name)
		}
	}
	for _, s := range []string{p.Entity, p.Method, p.URI, p.Scheme} {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	for name, values := range p.Header {
		n += uvarintLen(uint64(len(name))) + len(name) + uvarintLen(uint64(len(values)))
		for _, value := range values {
			n += uvarintLen(uint64(len(value))) + len(value)
		}
	}
	return n
}

// uvarintLen is the length of binary.AppendUvarint's encoding of x: seven bits a byte.
func uvarintLen(x uint64) int {
	return (bits.Len64(x|1) + 6) / 7
}

// varintLen is the length of binary.AppendVarint's encoding of x, zigzag encoded.
func varintLen(x int64) int {
	return uvarintLen(uint64(x)<<1 ^ uint64(x>>63))
}

func appendString(v []byte, s string) []byte {
	return append(binary.AppendUvarint(v, uint64(len(s))), s...)
}

// decodePayload decodes v, which the payload then owns (the body aliases it).
func decodePayload(v []byte) (*payload, error) {
	return decodePayloadAs(v, true)
}

// decodePayloadMeta decodes v without its headers and body, which it skips over rather than
// copies out: what a delivered or superseded event keeps (see shed).
func decodePayloadMeta(v []byte) (*payload, error) {
	return decodePayloadAs(v, false)
}

// decodePayloadAs is decodePayload, or decodePayloadMeta unless whole.
func decodePayloadAs(v []byte, whole bool) (*payload, error) {
	if len(v) > 0 && v[0] != 0 {
		p, err := decodeJSONPayload(v)
		if err == nil && !whole {
			p.Header, p.body = nil, nil
		}
		return p, err
	}
	if len(v) < 2 || (v[1] != payloadFormat && v[1] != payloadFormatDestinations) {
		return nil, fmt.Errorf("corrupt event payload of %d bytes", len(v))
	}
	r := byteReader{rest: v[2:]}
	var destinations []string
	if v[1] == payloadFormatDestinations {
		n := r.count()
		destinations = make([]string, 0, min(n, 64))
		for range n {
			destinations = append(destinations, r.string())
		}
	}
	p := &payload{Destinations: destinations, Version: r.varint(), BodyBytes: int(r.uvarint())}
	var values []string // every header's values, in one allocation
	if whole {
		fields := r
		values = make([]string, 0, fields.skipFields())
		r.copyText(len(r.rest) - len(fields.rest))
	}
	for _, s := range []*string{&p.Entity, &p.Method, &p.URI, &p.Scheme} {
		*s = r.string()
	}
	// The counts are checked only against the bytes left, so they size nothing up front: a
	// corrupt count must not allocate many times the record.
	if names := r.count(); names > 0 && whole {
		p.Header = make(http.Header, min(names, 64))
		for range names {
			name := r.string()
			start := len(values)
			for range r.count() {
				values = append(values, r.string())
			}
			p.Header[name] = values[start:len(values):len(values)]
		}
	} else {
		for range names {
			r.skip()
			for range r.count() {
				r.skip()
			}
		}
	}
	if r.failed {
		return nil, fmt.Errorf("corrupt event payload of %d bytes", len(v))
	}
	if len(r.rest) > 0 && whole {
		p.body = r.rest
	}
	return p, nil
}

// decodeJSONPayload decodes the earlier format: a uvarint length, that many bytes of JSON and
// the body.
func decodeJSONPayload(v []byte) (*payload, error) {
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

// byteReader reads the fields of an encoded payload; once one is cut short, failed is set and
// every later read returns zero.
type byteReader struct {
	rest   []byte
	failed bool
	// text, when set, is a copy of the next bytes of rest up to where tail bytes are left, as
	// one string: the strings read from it are cut from it, rather than each copied out (the
	// headers of a leased event were a dozen allocations).
	text string
	tail int
}

// copyText copies the next n bytes, which hold the strings to be read, into text.
func (r *byteReader) copyText(n int) {
	r.text, r.tail = string(r.rest[:n]), len(r.rest)-n
}

// skipFields passes over a payload's fields after its two numbers, four strings and the headers,
// and returns the number of header values (each at least a byte, so bounded by the record).
func (r *byteReader) skipFields() (values int) {
	for range 4 {
		r.skip()
	}
	for range r.count() {
		r.skip()
		n := r.count()
		for range n {
			r.skip()
		}
		values += n
	}
	return values
}

func (r *byteReader) uvarint() uint64 {
	n, w := binary.Uvarint(r.rest)
	if w <= 0 || r.failed {
		r.failed = true
		return 0
	}
	r.rest = r.rest[w:]
	return n
}

func (r *byteReader) varint() int64 {
	n, w := binary.Varint(r.rest)
	if w <= 0 || r.failed {
		r.failed = true
		return 0
	}
	r.rest = r.rest[w:]
	return n
}

// count reads a number of items that follow, each at least one byte long.
func (r *byteReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.rest)) {
		r.failed = true
		return 0
	}
	return int(n)
}

// skip passes over a string.
func (r *byteReader) skip() {
	n := r.count()
	if !r.failed {
		r.rest = r.rest[n:]
	}
}

func (r *byteReader) string() string {
	n := r.count()
	if r.failed {
		return ""
	}
	var s string
	if at := len(r.text) - (len(r.rest) - r.tail); at >= 0 && at+n <= len(r.text) {
		s = r.text[at : at+n]
	} else {
		s = string(r.rest[:n])
	}
	r.rest = r.rest[n:]
	return s
}

// event assembles the Event the Outbox hands out.
func (k outboxKeys) event(r *outboxRecord, p *payload) *dedupe.Event {
	return &dedupe.Event{
		Namespace: k.ns, ID: k.id,
		Entity: p.Entity, Version: p.Version, Method: p.Method, URI: p.URI,
		Header: p.Header, Body: p.body, BodyBytes: p.BodyBytes, Scheme: p.Scheme,
		State: r.State, Attempts: r.Attempts, NextAttempt: r.NextAttempt,
		LastStatus: r.LastStatus, LastError: r.LastError,
		AcceptedAt: r.AcceptedAt, UpdatedAt: r.UpdatedAt, LeaseToken: r.Leases,
		OrderKey: r.OrderKey, Seq: r.Seq, Holds: r.Holds,
	}
}

// getRecord reads the delivery state of an event. live is false when there
// is none or its exact expiry has passed; rec is still returned in the
// latter case so its index entries can be cleaned up.
func getRecord(txn *badger.Txn, k []byte, now time.Time) (rec *outboxRecord, live bool, err error) {
	rec, _, live, err = getRecordUntil(txn, k, now)
	return rec, live, err
}

// getRecordUntil is getRecord, with the record's exact expiry (zero for none).
func getRecordUntil(txn *badger.Txn, k []byte, now time.Time) (rec *outboxRecord, until time.Time, live bool, err error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, time.Time{}, false, nil
	}
	if err != nil {
		return nil, time.Time{}, false, err
	}
	var expires int64
	err = item.Value(func(v []byte) error {
		if len(v) < nanosLen {
			return fmt.Errorf("corrupt event record of %d bytes", len(v))
		}
		expires = int64(binary.BigEndian.Uint64(v))
		rec, err = decodeRecord(v[nanosLen:])
		return err
	})
	if err != nil {
		return nil, time.Time{}, false, err
	}
	if expires == 0 {
		return rec, time.Time{}, true, nil
	}
	return rec, time.Unix(0, expires), now.UnixNano() < expires, nil
}

// putRecord writes the delivery state; a zero expires means it never expires.
func putRecord(txn *badger.Txn, k []byte, rec *outboxRecord, expires time.Time) error {
	v := make([]byte, nanosLen, maxRecordLen+len(rec.LastError)+2*binary.MaxVarintLen64+len(rec.OrderKey))
	if !expires.IsZero() {
		binary.BigEndian.PutUint64(v, uint64(expires.UnixNano()))
	}
	v, err := rec.encode(v)
	if err != nil {
		return fmt.Errorf("encoding event record: %w", err)
	}
	return txn.SetEntry(entry(k, v, expires))
}

// getPayload reads the request of an event whose record is live.
func getPayload(txn *badger.Txn, k []byte) (*payload, error) {
	v, err := payloadBytes(txn, k)
	if err != nil {
		return nil, err
	}
	return decodePayload(v)
}

// getPayloadMeta reads an event's payload without its headers and body.
func getPayloadMeta(txn *badger.Txn, k []byte) (*payload, error) {
	meta, found, err := payloadMetaIfAny(txn, k)
	if err == nil && !found {
		return nil, fmt.Errorf("event record without payload %q", k)
	}
	return meta, err
}

// payloadMetaIfAny is getPayloadMeta, and whether there is a payload.
func payloadMetaIfAny(txn *badger.Txn, k []byte) (*payload, bool, error) {
	item, err := txn.Get(k)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var meta *payload
	err = item.Value(func(v []byte) error {
		meta, err = decodePayloadMeta(v) // no body: it would alias v, Badger's only during this call
		return err
	})
	return meta, err == nil, err
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

// shed rewrites the payload without its body and headers, expiring at
// expires, and returns it so. A delivered or superseded event is
// never sent again, so keeping its body for the listing period would only
// double the value log's writes and hold a KiB or more per event on disk
// (at 100 events/s over the default 24h keep, 8 GiB); its headers, which
// no listing shows, would stay in the LSM tree, a few hundred bytes an event.
// It decodes the stored value in place rather than copying out the body.
func shed(txn *badger.Txn, k []byte, expires time.Time) (*payload, error) {
	meta, err := getPayloadMeta(txn, k)
	if err != nil {
		return nil, err
	}
	return meta, txn.SetEntry(entry(k, meta.encode(), expires))
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
