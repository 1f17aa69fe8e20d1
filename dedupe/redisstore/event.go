package redisstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// The fields of an event's delivery hash (Q e:<id>, doc.go). Times are Unix nanoseconds in base
// 10, so they come back exactly; the scripts never compute with them (Lua's numbers are doubles).
const (
	fieldState      = "st"
	fieldAttempts   = "att"
	fieldLastStatus = "ls"
	fieldLastError  = "le"
	fieldAccepted   = "acc"
	fieldUpdated    = "upd"
	fieldNext       = "nxt" // when Pending: due, or the end of its lease
	fieldToken      = "tok" // number of leases handed out: the latest one's LeaseToken
	fieldEntity     = "ent"
	fieldVersion    = "ver"
	fieldMethod     = "m"
	fieldURI        = "u"
	fieldScheme     = "sch"
	fieldBodyBytes  = "bb"
	fieldHeader     = "hdr"  // encodeHeader; dropped once Delivered or Superseded
	fieldBody       = "body" // dropped once Delivered or Superseded
	fieldMember     = "lx"   // its member in the state listings (listMember)
	// fieldShared, set ("1") in each delivery hash of an event queued for several destinations,
	// says its header and body are not in it but once in the route's shared hash (T p:<id>),
	// which holds fieldHeader, fieldBody and fieldDestinations.
	fieldShared       = "p"
	fieldDestinations = "d" // the shared hash's: the names of the event's destinations, space-separated
	// An event queued in an ordered queue (dedupe.Destination.OrderKey) has its key there, its
	// sequence number, and while it is a dead head holding its key, since when (ns); none of
	// them otherwise.
	fieldOrderKey = "ok"
	fieldSeq      = "sq"
	fieldHolds    = "hd"
	// The lease script keeps "ln" too: the token of the Lease call that leased it last; the
	// replay script "rp": the token of the Replay call that replayed it last; the accept
	// script "ac" until a final state: the token of the Accept call that stored it (in the
	// shared hash, while it lasts, for an event of several destinations); the skip script
	// "sk": the token of the Skip call that released its key.
)

// listFields are the fields List returns: all but the header and body.
var listFields = []string{
	fieldState, fieldAttempts, fieldLastStatus, fieldLastError, fieldAccepted, fieldUpdated, fieldNext,
	fieldToken, fieldEntity, fieldVersion, fieldMethod, fieldURI, fieldScheme, fieldBodyBytes,
	fieldOrderKey, fieldSeq, fieldHolds,
}

// acceptFields are the field/value pairs Accept writes for ev, Pending and due at next, in the
// delivery hash of an event queued for one destination. Fields that start at zero (attempts, last
// status and error, lease token; entity and version when ev has none) are left out: a missing
// field reads as zero, here and in the scripts, and each field of a hash with a body costs Redis
// an entry of its own.
func acceptFields(ev *dedupe.Event, accepted, next, updated time.Time) []any {
	return eventFields(ev, accepted, next, updated, true)
}

// deliveryFields are acceptFields without the header and body, which an event queued for
// several destinations keeps once, in its shared hash (sharedFields), for each of its deliveries.
func deliveryFields(ev *dedupe.Event, accepted, next, updated time.Time) []any {
	return eventFields(ev, accepted, next, updated, false)
}

// sharedFields are the field/value pairs of the shared hash of ev, queued for destinations.
func sharedFields(ev *dedupe.Event, destinations []dedupe.Destination) []any {
	names := make([]string, len(destinations))
	for i, d := range destinations {
		names[i] = d.Name
	}
	return []any{fieldDestinations, strings.Join(names, " "), fieldHeader, encodeHeader(ev.Header), fieldBody, ev.Body}
}

func eventFields(ev *dedupe.Event, accepted, next, updated time.Time, withBody bool) []any {
	fields := make([]any, 0, 26)
	fields = append(fields, fieldState, string(dedupe.Pending),
		fieldAccepted, nanos(accepted), fieldUpdated, nanos(updated), fieldNext, nanos(next))
	if ev.Entity != "" {
		fields = append(fields, fieldEntity, ev.Entity)
	}
	if ev.Version != 0 {
		fields = append(fields, fieldVersion, strconv.FormatInt(ev.Version, 10))
	}
	fields = append(fields, fieldMethod, ev.Method, fieldURI, ev.URI, fieldScheme, ev.Scheme,
		fieldBodyBytes, strconv.Itoa(len(ev.Body)))
	if withBody {
		fields = append(fields, fieldHeader, encodeHeader(ev.Header), fieldBody, ev.Body)
	}
	return append(fields, fieldMember, listMember(accepted, ev.ID))
}

// decodeEvent assembles an event from its hash's fields; a missing one reads as zero.
func decodeEvent(namespace, id string, f map[string]string) (*dedupe.Event, error) {
	ev := &dedupe.Event{
		Namespace: namespace, ID: id, Entity: f[fieldEntity], Method: f[fieldMethod], URI: f[fieldURI],
		Scheme: f[fieldScheme], State: dedupe.State(f[fieldState]), LastError: f[fieldLastError],
		OrderKey: f[fieldOrderKey], Holds: f[fieldHolds] != "",
	}
	var err error
	ints := []struct {
		field string
		to    *int
	}{{fieldAttempts, &ev.Attempts}, {fieldLastStatus, &ev.LastStatus}, {fieldBodyBytes, &ev.BodyBytes}}
	for _, i := range ints {
		if *i.to, err = atoi(f[i.field]); err != nil {
			return nil, fmt.Errorf("event %q: field %s: %w", id, i.field, err)
		}
	}
	if ev.Version, err = parseInt(f[fieldVersion]); err != nil {
		return nil, fmt.Errorf("event %q: version: %w", id, err)
	}
	tok, err := parseInt(f[fieldToken])
	if err != nil {
		return nil, fmt.Errorf("event %q: lease token: %w", id, err)
	}
	ev.LeaseToken = uint64(tok)
	seq, err := parseInt(f[fieldSeq])
	if err != nil {
		return nil, fmt.Errorf("event %q: sequence: %w", id, err)
	}
	ev.Seq = uint64(seq)
	times := []struct {
		field string
		to    *time.Time
	}{{fieldAccepted, &ev.AcceptedAt}, {fieldUpdated, &ev.UpdatedAt}, {fieldNext, &ev.NextAttempt}}
	for _, t := range times {
		if *t.to, err = parseNanos(f[t.field]); err != nil {
			return nil, fmt.Errorf("event %q: field %s: %w", id, t.field, err)
		}
	}
	if !live(ev.State) {
		return ev, nil // the header and body are not kept, or not for this delivery (shared)
	}
	if ev.Header, err = decodeHeader(f[fieldHeader]); err != nil {
		return nil, fmt.Errorf("event %q: %w", id, err)
	}
	if body := f[fieldBody]; body != "" {
		ev.Body = []byte(body)
	}
	return ev, nil
}

// live says a delivery in state may still be attempted, or replayed: the event's header and body
// are kept for it.
func live(state dedupe.State) bool { return state == dedupe.Pending || state == dedupe.Dead }

func atoi(s string) (int, error) {
	n, err := parseInt(s)
	return int(n), err
}

func parseInt(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// nanos is t in Unix nanoseconds, base 10; "0" for the zero time.
func nanos(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func parseNanos(s string) (time.Time, error) {
	n, err := parseInt(s)
	if err != nil || n == 0 {
		return time.Time{}, err
	}
	return time.Unix(0, n).UTC(), nil
}

// micros is t as a sorted-set score: Unix microseconds, clamped to [0, 2^53] where a double
// holds every integer exactly.
func micros(t time.Time) string {
	us := t.UnixMicro()
	switch {
	case t.Before(time.Unix(0, 0)):
		us = 0
	case us > 1<<53:
		us = 1 << 53
	}
	return strconv.FormatInt(us, 10)
}

// listMember is an event's member in the state listings, which sort their members as bytes (all
// scores are 0): the accept time as 16 hex digits of Unix nanoseconds (clamped as dedupe does),
// then the ID. So a listing runs oldest accepted first, then by ID, and a Cursor is a member.
func listMember(accepted time.Time, id string) string {
	var ns uint64
	switch {
	case accepted.Before(time.Unix(0, 0)):
	case accepted.After(time.Unix(0, math.MaxInt64)):
		ns = math.MaxInt64
	default:
		ns = uint64(accepted.UnixNano())
	}
	b := make([]byte, 16, 16+len(id))
	for i := 15; i >= 0; i-- {
		b[i] = "0123456789abcdef"[ns&0xf]
		ns >>= 4
	}
	return string(append(b, id...))
}

// encodeHeader lays the header out as the number of names, then each name (sorted) with its
// number of values and the values, strings as a uvarint length and the bytes: header values
// that are not UTF-8 come back as they arrived.
func encodeHeader(h http.Header) string {
	names := make([]string, 0, len(h))
	size := uvarintLen(uint64(len(h)))
	for name, values := range h {
		names = append(names, name)
		size += stringLen(name) + uvarintLen(uint64(len(values)))
		for _, value := range values {
			size += stringLen(value)
		}
	}
	slices.Sort(names)
	v := binary.AppendUvarint(make([]byte, 0, size), uint64(len(h)))
	for _, name := range names {
		v = appendString(v, name)
		v = binary.AppendUvarint(v, uint64(len(h[name])))
		for _, value := range h[name] {
			v = appendString(v, value)
		}
	}
	return string(v)
}

func appendString(v []byte, s string) []byte {
	return append(binary.AppendUvarint(v, uint64(len(s))), s...)
}

// decodeHeader is encodeHeader's inverse; no names (or no field) is a nil header.
func decodeHeader(s string) (http.Header, error) {
	if s == "" {
		return nil, nil
	}
	r := reader{rest: s}
	names := r.count()
	if names == 0 {
		return nil, r.err()
	}
	h := make(http.Header, min(names, 64))
	for range names {
		name := r.string()
		n := r.count()
		values := make([]string, 0, min(n, 16))
		for range n {
			values = append(values, r.string())
		}
		h[name] = values
	}
	return h, r.err()
}

// reader reads encodeHeader's fields; once one is cut short, every later read returns zero.
type reader struct {
	rest   string
	failed bool
}

// count reads a number of items that follow, each at least one byte long, so a corrupt count
// cannot size anything beyond what is left.
func (r *reader) count() int {
	n, w := binary.Uvarint([]byte(r.rest[:min(len(r.rest), binary.MaxVarintLen64)]))
	if r.failed || w <= 0 || n > uint64(len(r.rest)-w) {
		r.failed = true
		return 0
	}
	r.rest = r.rest[w:]
	return int(n)
}

func (r *reader) string() string {
	n := r.count()
	if r.failed {
		return ""
	}
	s := r.rest[:n]
	r.rest = r.rest[n:]
	return s
}

func (r *reader) err() error {
	if r.failed || r.rest != "" {
		return fmt.Errorf("corrupt header of the event")
	}
	return nil
}

// storedSize is the size of ev's request as the Badger outbox stores it, so that both backends
// refuse the same events with ErrTooLarge: 0 and a format byte, the version and the body's size
// as varints, entity, method, URI and scheme, the header's names and values (strings with a
// uvarint length), and the body.
func storedSize(ev *dedupe.Event) int {
	size := 2 + varintLen(ev.Version) + uvarintLen(uint64(len(ev.Body))) + len(ev.Body) + uvarintLen(uint64(len(ev.Header)))
	for _, s := range []string{ev.Entity, ev.Method, ev.URI, ev.Scheme} {
		size += stringLen(s)
	}
	for name, values := range ev.Header {
		size += stringLen(name) + uvarintLen(uint64(len(values)))
		for _, value := range values {
			size += stringLen(value)
		}
	}
	return size
}

func stringLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

// uvarintLen is the length of n as a uvarint: 7 bits a byte.
func uvarintLen(n uint64) int { return max(1, (bits.Len64(n)+6)/7) }

// varintLen is the length of n as a varint: zig-zag encoded, then as a uvarint.
func varintLen(n int64) int { return uvarintLen(uint64(n<<1) ^ uint64(n>>63)) }
