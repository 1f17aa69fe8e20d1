package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hookgate/hookgate/dedupe"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, rec := range []outboxRecord{
		{State: dedupe.Pending, AcceptedAt: base, NextAttempt: base.Add(time.Second), UpdatedAt: base, Leased: true, Leases: 7},
		{State: dedupe.Delivered, Attempts: 3, LastStatus: 200, AcceptedAt: base, UpdatedAt: base.Add(time.Minute)},
		{State: dedupe.Dead, Attempts: 8, LastStatus: 503, LastError: "upstream: 503 Service Unavailable", AcceptedAt: base, UpdatedAt: base},
		{State: dedupe.Superseded, AcceptedAt: base},
	} {
		v, err := rec.encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRecord(v)
		if err != nil {
			t.Fatalf("%s: %v", rec.State, err)
		}
		if !reflect.DeepEqual(*got, rec) {
			t.Errorf("round trip:\n got %+v\nwant %+v", *got, rec)
		}
		for n := range len(v) - len(rec.LastError) {
			if _, err := decodeRecord(v[:n]); err == nil {
				t.Errorf("%s: a record cut to %d of %d bytes decoded", rec.State, n, len(v))
			}
		}
	}
	if _, err := (&outboxRecord{State: "lost"}).encode(nil); err == nil {
		t.Error("an unknown state was encoded")
	}
}

// Header values are bytes: those that are not UTF-8 (which JSON turned into U+FFFD) reach the
// upstream exactly as they arrived.
func TestHeaderBytesKeptExactly(t *testing.T) {
	b := openTest(t)
	want := queued("binary", base)
	want.Header.Set("X-Raw", "a\xff\xfeb")
	want.Header.Add("X-Raw", "\x80")
	enqueue(t, b, want)
	evs := lease(t, b, base, 1, time.Minute)
	if len(evs) != 1 {
		t.Fatalf("leased %d events, want 1", len(evs))
	}
	if got := evs[0].Header; !reflect.DeepEqual(got, want.Header) {
		t.Errorf("header %q, want %q", got, want.Header)
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	for _, p := range []payload{
		{Method: "POST", URI: "/hooks?a=\xff", BodyBytes: 3, body: []byte("{}\xff"), Scheme: "stripe",
			Entity: "cus_\xfe", Version: -7, Header: http.Header{"A": {"1", "\xff"}, "B": {}}},
		{Method: "PUT", URI: "/", BodyBytes: 1 << 20},
		{Method: "POST", URI: "/", BodyBytes: 2, body: []byte("{}"), Destinations: []string{"default", "billing", "a"}},
	} {
		v := p.encode()
		got, err := decodePayload(v)
		if err != nil {
			t.Fatalf("%s: %v", p.Method, err)
		}
		if !reflect.DeepEqual(*got, p) {
			t.Errorf("round trip:\n got %+v\nwant %+v", *got, p)
		}
		for n := range len(v) - len(p.body) {
			if _, err := decodePayload(v[:n]); err == nil {
				t.Errorf("%s: a payload cut to %d of %d bytes decoded", p.Method, n, len(v))
			}
		}
	}
}

// A payload is laid out in one buffer of its exact size, however large its numbers and however
// many its headers, and decodes as it was.
func TestPayloadEncodesIntoABufferOfItsSize(t *testing.T) {
	many := http.Header{}
	for i := range 40 {
		many[fmt.Sprintf("X-Header-%02d", i)] = []string{strings.Repeat("v", 130*i), ""}
	}
	for _, p := range []*payload{
		benchPayload(),
		{Method: "POST", URI: strings.Repeat("/u", 200), Entity: "e", Version: math.MinInt64, BodyBytes: 1 << 20, Header: many},
		{Method: "POST", URI: "/", Version: math.MaxInt64, Header: http.Header{"Nil": nil}},
		{},
	} {
		v := p.encode()
		if len(v) != cap(v) {
			t.Errorf("payload of %d bytes encoded in a buffer of %d", len(v), cap(v))
		}
		got, err := decodePayload(v)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != p.Version || got.URI != p.URI || len(got.Header) != len(p.Header) {
			t.Errorf("decoded version %d, URI of %d bytes, %d headers; want %d, %d, %d",
				got.Version, len(got.URI), len(got.Header), p.Version, len(p.URI), len(p.Header))
		}
	}
}

// Every payload is laid out byte for byte as the stored format says (layoutOf, written plainly
// from encode's doc comment), so what one build wrote another reads: random payloads with
// numbers at the varint widths' edges, up to 80 header names (some differing only in case),
// nil, empty and repeated values, and values of a length near MaxPayload.
func TestPayloadLayoutIsTheStoredFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 1))
	edges := []uint64{0, 1, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<28 - 1, 1 << 28, 1<<35 - 1, 1 << 35, 1<<63 - 1, 1 << 63, math.MaxUint64}
	number := func() uint64 {
		if rng.IntN(2) == 0 {
			return edges[rng.IntN(len(edges))]
		}
		return rng.Uint64() >> rng.IntN(64)
	}
	text := func(max int) string {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	names := []string{"Content-Type", "content-type", "CONTENT-TYPE", "Webhook-Id", "webhook-id", "X-A", "x-a", "", "\xff"}
	for i := range 2000 {
		p := &payload{Entity: text(3), Version: int64(number()), Method: text(8), URI: text(300), Scheme: text(10),
			BodyBytes: int(number()), body: []byte(text(200))}
		if i%7 != 0 {
			p.Header = http.Header{}
			for range rng.IntN(81) {
				name := names[rng.IntN(len(names))]
				if rng.IntN(2) == 0 {
					name = fmt.Sprintf("X-%d", rng.IntN(100))
				}
				var values []string
				switch rng.IntN(4) {
				case 0: // nil
				case 1:
					values = []string{}
				default:
					for range 1 + rng.IntN(4) {
						values = append(values, text(150))
					}
				}
				p.Header[name] = values
			}
		}
		if got, want := p.encode(), layoutOf(p); !bytes.Equal(got, want) {
			t.Fatalf("payload %d (%d headers) encoded as %d bytes that differ from the format's %d", i, len(p.Header), len(got), len(want))
		}
	}
	huge := &payload{Method: "POST", URI: "/", BodyBytes: 1 << 10, body: make([]byte, 1<<10),
		Header: http.Header{"X-Huge": {strings.Repeat("h", dedupe.MaxPayload-1<<11), "", strings.Repeat("i", 1<<14)}, "X-Nil": nil}}
	if got, want := huge.encode(), layoutOf(huge); !bytes.Equal(got, want) || len(got) != cap(got) {
		t.Errorf("a payload of %d bytes (%d allocated) differs from the format's %d", len(got), cap(got), len(want))
	}
}

// layoutOf lays p out as the stored format says, the plain way: 0, the format, the version
// (varint), the body's size (uvarint), entity, method, URI, scheme, the number of header names,
// each name in byte order with its number of values and the values (strings as a uvarint length
// and the bytes), and the body.
func layoutOf(p *payload) []byte {
	str := func(v []byte, s string) []byte { return append(binary.AppendUvarint(v, uint64(len(s))), s...) }
	v := []byte{0, payloadFormat}
	v = binary.AppendVarint(v, p.Version)
	v = binary.AppendUvarint(v, uint64(p.BodyBytes))
	v = str(str(str(str(v, p.Entity), p.Method), p.URI), p.Scheme)
	v = binary.AppendUvarint(v, uint64(len(p.Header)))
	for _, name := range slices.Sorted(maps.Keys(p.Header)) {
		v = binary.AppendUvarint(str(v, name), uint64(len(p.Header[name])))
		for _, value := range p.Header[name] {
			v = str(v, value)
		}
	}
	return append(v, p.body...)
}

// Payloads written before headers were stored as bytes (a uvarint length, JSON, the body) still
// decode, and an event queued in that format is leased as it was accepted.
func TestPayloadOfTheJSONFormatDecodes(t *testing.T) {
	b := openTest(t)
	enqueue(t, b, queued("old", base))
	meta := `{"entity":"cus_1","version":7,"method":"POST","uri":"/hooks","header":{"A":["1","2"]},"scheme":"stripe","body_bytes":2}`
	v := append(binary.AppendUvarint(nil, uint64(len(meta))), meta...)
	v = append(v, "{}"...)
	ok, _ := keysFor("stripe", "old")
	if err := b.db.Update(func(txn *badger.Txn) error { return txn.Set(ok.payload, v) }); err != nil {
		t.Fatal(err)
	}
	evs := lease(t, b, base, 1, time.Minute)
	if len(evs) != 1 {
		t.Fatalf("leased %d events, want 1", len(evs))
	}
	got := evs[0]
	if got.Entity != "cus_1" || got.Version != 7 || got.Method != "POST" || got.URI != "/hooks" ||
		got.Scheme != "stripe" || got.BodyBytes != 2 || string(got.Body) != "{}" ||
		!reflect.DeepEqual(got.Header, http.Header{"A": {"1", "2"}}) {
		t.Errorf("leased %+v", got)
	}
}

// BenchmarkDecodePayload decodes a stored 1 KiB event with a provider's six headers, whole (as a
// Lease hands it out) and its metadata only (as delivering it rewrites it): allocs/op is what the
// lease loop and the committer pay per event.
// benchPayload is a signed 1 KiB webhook as queued, with six headers.
func benchPayload() *payload {
	return &payload{Method: http.MethodPost, URI: "/hooks/bench?x=1", Scheme: "standard", BodyBytes: 1024,
		Header: http.Header{
			"Content-Type": {"application/json"}, "User-Agent": {"Provider-Webhooks/1.0"}, "Accept-Encoding": {"gzip"},
			"Webhook-Id": {"evt_0000000001"}, "Webhook-Timestamp": {"1764633600"},
			"Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
		},
		body: bytes.Repeat([]byte("x"), 1024)}
}

// BenchmarkEncodePayload is what an Accept spends laying out its event, before its commit.
func BenchmarkEncodePayload(b *testing.B) {
	p := benchPayload()
	b.ReportAllocs()
	for b.Loop() {
		p.encode()
	}
}

func BenchmarkDecodePayload(b *testing.B) {
	v := benchPayload().encode()
	for _, whole := range []bool{true, false} {
		name := map[bool]string{true: "whole", false: "metadata"}[whole]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodePayloadAs(v, whole); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Events of queues without an order key write what they did before ordered delivery existed:
// format-2 records and none of the order's keys (sequence, key FIFOs, counts, held keys), through
// accept, a death, a replay and a delivery.
func TestUnorderedEventsWriteNoOrderKeysAndFormat2Records(t *testing.T) {
	b := openTest(t)
	ctx := context.Background()
	billing := dedupe.QueueNamespace("stripe", "billing")
	c := dedupe.Claim{Namespace: "stripe", ID: "e1", Destinations: []dedupe.Destination{{Name: "billing"}, {Name: "analytics"}}}
	expect(t, "accept", accept(t, b, c, queued("e1", base)), dedupe.Claimed)
	evs, err := b.Lease(ctx, billing, base, 1, time.Minute)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Lease: %v, %v", ids(evs), err)
	}
	evs[0].State = dedupe.Dead
	update(t, b, evs[0], time.Hour)
	if err := b.Replay(ctx, billing, "e1", base); err != nil {
		t.Fatal(err)
	}
	if evs, err = b.Lease(ctx, billing, base.Add(time.Second), 1, time.Minute); err != nil || len(evs) != 1 {
		t.Fatalf("Lease after the replay: %v, %v", ids(evs), err)
	}
	evs[0].State = dedupe.Delivered
	update(t, b, evs[0], time.Hour)

	records := 0
	err = b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			ns, ok := namespaceOf(k)
			if !ok || len(k) < len(ns)+3 {
				continue
			}
			switch kind := k[len(ns)+1]; kind {
			case kindSequence, kindKeyFIFO, kindKeyCount, kindHeld:
				t.Errorf("an unordered event wrote the order key %q", k)
			case kindOutbox:
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				if v[nanosLen] != recordFormat {
					t.Errorf("record %q is format %d, want %d", k, v[nanosLen], recordFormat)
				}
				records++
			}
		}
		return nil
	})
	if err != nil || records != 2 {
		t.Fatalf("walked the ledger: %v, %d records, want the two destinations'", err, records)
	}
}
