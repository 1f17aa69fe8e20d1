package badgerstore

import (
	"bytes"
	"encoding/binary"
	"maps"
	"net/http"
	"runtime"
	"slices"
	"testing"
)

// FuzzDecodePayload: corrupt or truncated stored payloads must error, never panic; what decodes
// (in either format) encodes back to a payload that decodes the same, and encodes again to the
// same bytes. Decoding the metadata only (as shed does) fails and succeeds with it, and gives the
// same payload but for the headers and body.
func FuzzDecodePayload(f *testing.F) {
	f.Add((&payload{Method: "POST", URI: "/", body: []byte("{}")}).encode())
	f.Add((&payload{Entity: "order-7", Version: -3, Method: "PUT", URI: "/hook?x=1", Scheme: "github",
		Header: http.Header{"X-A": {"1", "\xff"}, "X-B": {}}, BodyBytes: 2, body: []byte("{}")}).encode())
	f.Add([]byte{0, 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f})
	f.Add([]byte{3, '{', '}', 'x'})
	f.Add(append([]byte{byte(len(`{"method":"POST","uri":"/","header":{"A":["b"]},"body_bytes":1}`))},
		`{"method":"POST","uri":"/","header":{"A":["b"]},"body_bytes":1}x`...))
	f.Fuzz(func(t *testing.T, v []byte) {
		p, err := decodePayload(v)
		meta, metaErr := decodePayloadMeta(v)
		if (err == nil) != (metaErr == nil) {
			t.Fatalf("decoding the whole payload: %v; its metadata only: %v", err, metaErr)
		}
		if err != nil {
			return
		}
		if p == nil {
			t.Fatal("nil payload without error")
		}
		if want := (payload{Entity: p.Entity, Version: p.Version, Method: p.Method, URI: p.URI,
			Scheme: p.Scheme, BodyBytes: p.BodyBytes}); meta.Header != nil || meta.body != nil || !samePayload(meta, &want) {
			t.Fatalf("metadata decoded as %+v (body %q), want %+v", meta, meta.body, want)
		}
		again := p.encode()
		back, err := decodePayload(again)
		if err != nil || !samePayload(back, p) {
			t.Fatalf("decoded %+v (body %q), encoded and decoded again %+v, %v", p, p.body, back, err)
		}
		if third := back.encode(); !bytes.Equal(third, again) {
			t.Fatalf("a payload encodes as %x, decoded and encoded again as %x", again, third)
		}
	})
}

// samePayload reports whether a and b hand out the same event: a header name with no values, a
// nil header or an empty body read the same as their empty counterparts.
func samePayload(a, b *payload) bool {
	return a.Entity == b.Entity && a.Version == b.Version && a.Method == b.Method && a.URI == b.URI &&
		a.Scheme == b.Scheme && a.BodyBytes == b.BodyBytes && bytes.Equal(a.body, b.body) &&
		maps.EqualFunc(a.Header, b.Header, slices.Equal[[]string])
}

// A corrupt payload's counts are checked against the bytes left, so the allocation for one is
// bounded by its size; this measures by how much.
func TestDecodePayloadAllocationBounded(t *testing.T) {
	const size = 1 << 20
	v := []byte{0, payloadFormat, 0, 0, 0, 0, 0, 0} // version, body size, four empty strings
	v = binary.AppendUvarint(v, size)               // header names claimed
	v = append(v, make([]byte, size)...)            // each an empty name with zero values
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decodePayload(v)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("decoding %d bytes allocated %d bytes (err %v)", len(v), allocated, err)
	if allocated > 16*uint64(len(v)) {
		t.Errorf("decoding a corrupt payload of %d bytes allocated %d bytes, %dx its size", len(v), allocated, allocated/uint64(len(v)))
	}
}
