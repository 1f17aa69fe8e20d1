package badgerstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"reflect"
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
