package dedupe

import (
	"encoding/binary"
	"runtime"
	"testing"
)

// FuzzDecodePayload: corrupt or truncated stored payloads must error, never panic.
func FuzzDecodePayload(f *testing.F) {
	f.Add((&payload{Method: "POST", URI: "/", body: []byte("{}")}).encode())
	f.Add([]byte{0, 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f})
	f.Add([]byte{3, '{', '}', 'x'})
	f.Fuzz(func(t *testing.T, v []byte) {
		p, err := decodePayload(v)
		if err == nil && p == nil {
			t.Fatal("nil payload without error")
		}
	})
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
