package main

import (
	"testing"
	"time"

	"github.com/hookgate/hookgate/verify"
)

// The load's requests verify in the scheme they are signed in, pre-signed or signed inline, and
// carry their own event ID.
func TestEventsVerifyInTheirPresetsScheme(t *testing.T) {
	for _, preset := range []string{"standard", "stripe", "github"} {
		factory, err := newEventFactory(preset, 1024)
		if err != nil {
			t.Fatal(err)
		}
		v, err := verify.New(factory.scheme, []string{benchSecret})
		if err != nil {
			t.Fatal(err)
		}
		source := &eventSource{factory: factory}
		if _, err := source.presign(2); err != nil {
			t.Fatal(err)
		}
		source.presignedAt = time.Now() // the first two pre-signed, the third signed inline
		for range 3 {
			seq, header, body, ok := source.take()
			if !ok || len(body) != 1024 {
				t.Fatalf("%s: event %d: %v, %d bytes", preset, seq, ok, len(body))
			}
			result, err := v.Verify(header, body, time.Now())
			if err != nil {
				t.Fatalf("%s: event %d does not verify: %v (headers %v)", preset, seq, err, header)
			}
			if result.ID != eventID(seq) && result.ID != "" {
				t.Errorf("%s: event %d verified as %q", preset, seq, result.ID)
			}
		}
		if source.inline.Load() != 1 {
			t.Errorf("%s: %d signed inline, want 1", preset, source.inline.Load())
		}
	}
}
