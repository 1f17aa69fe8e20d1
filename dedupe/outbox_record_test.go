package dedupe

import (
	"reflect"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, rec := range []outboxRecord{
		{State: Pending, AcceptedAt: base, NextAttempt: base.Add(time.Second), UpdatedAt: base, Leased: true},
		{State: Delivered, Attempts: 3, LastStatus: 200, AcceptedAt: base, UpdatedAt: base.Add(time.Minute)},
		{State: Dead, Attempts: 8, LastStatus: 503, LastError: "upstream: 503 Service Unavailable", AcceptedAt: base, UpdatedAt: base},
		{State: Superseded, AcceptedAt: base},
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
