package badgerstore

import (
	"encoding/binary"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// recordSeeds are real encoded records: one per state, leased and not, with and without a last
// error, and one of the unfenced format 1.
func recordSeeds(f *testing.F) [][]byte {
	f.Helper()
	var seeds [][]byte
	for _, rec := range []outboxRecord{
		{State: dedupe.Pending, AcceptedAt: base, NextAttempt: base.Add(time.Minute), UpdatedAt: base, Leased: true, Leases: 3},
		{State: dedupe.Pending, Attempts: 2, LastStatus: 503, LastError: "upstream answered 503", AcceptedAt: base, NextAttempt: base.Add(time.Hour), UpdatedAt: base, Leases: 2},
		{State: dedupe.Delivered, Attempts: 1, LastStatus: 200, AcceptedAt: base, UpdatedAt: base, Leases: 1},
		{State: dedupe.Dead, Attempts: 8, LastStatus: 500, LastError: "upstream answered 500; gave up after 8 attempts", AcceptedAt: base, UpdatedAt: base, Leases: 1 << 40},
		{State: dedupe.Superseded, LastError: "superseded: version 7 of the entity was already delivered"},
	} {
		v, err := rec.encode(nil)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, v)
	}
	unfenced := []byte{recordFormatUnfenced, 1, 0, 2, 0}
	for range 3 {
		unfenced = binary.AppendVarint(unfenced, base.UnixNano())
	}
	return append(seeds, append(unfenced, "upstream: 503"...))
}

// FuzzDecodeRecord: truncated or corrupt stored records give an error, never a panic; what
// decodes holds no more than the record's bytes and encodes back to a record that decodes the same.
func FuzzDecodeRecord(f *testing.F) {
	for _, v := range recordSeeds(f) {
		f.Add(v)
		f.Add(v[:len(v)/2])
	}
	f.Add([]byte{recordFormat, 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, v []byte) {
		r, err := decodeRecord(v)
		if err != nil {
			return
		}
		if r == nil {
			t.Fatal("nil record without error")
		}
		if len(r.LastError) > len(v) {
			t.Fatalf("a record of %d bytes decoded a last error of %d", len(v), len(r.LastError))
		}
		again, err := r.encode(nil)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		back, err := decodeRecord(again)
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("decoded %+v, encoded and decoded again %+v, %v", r, back, err)
		}
	})
}

// Decoding a record allocates the record and its last error, whatever its numbers claim; this
// measures by how much for a record of a MiB.
func TestDecodeRecordAllocationBounded(t *testing.T) {
	v := []byte{recordFormat, 1, 0}
	for range 3 { // attempts, last status and leases, as large as they go
		v = binary.AppendUvarint(v, 1<<64-1)
	}
	for range 3 {
		v = binary.AppendVarint(v, -1<<63)
	}
	v = append(v, make([]byte, 1<<20)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decodeRecord(v)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("decoding %d bytes allocated %d bytes (err %v)", len(v), allocated, err)
	if allocated > 2*uint64(len(v)) {
		t.Errorf("decoding a record of %d bytes allocated %d bytes", len(v), allocated)
	}
}
