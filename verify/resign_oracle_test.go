package verify

import (
	"fmt"
	"testing"
	"time"
)

// A request the provider signed an hour ago, re-signed now, passes the provider's own npm
// library (its freshness window included) for every preset the oracle knows that resign
// refreshes; the original, an hour old, is refused by the libraries that check the time.
func TestResignedRequestsPassProviderLibraries(t *testing.T) {
	for _, pc := range presetCases(t) {
		c := mustPreset(t, pc.preset)
		r, err := NewResigner(c, pc.signingKey)
		if err != nil || !r.Refreshes() {
			continue // public-key, body-timestamp or timestamp-less schemes: TestResign*
		}
		t.Run(pc.preset, func(t *testing.T) {
			signedAt, now := time.Now().Add(-time.Hour), time.Now()
			body := fmt.Sprintf(`{"id":"evt_%d","event_id":"evt_%[1]d","type":"test"}`, now.UnixNano())
			original, ok := pc.librarySigned(t, body, signedAt)
			if !ok {
				original = pc.message(body)
				if err := SignMessage(c, pc.signingKey, "msg_oracle_1", signedAt, original); err != nil {
					t.Fatal(err)
				}
			}
			stale := oracleVerify(t, pc.oracleRequest(original, now))
			resigned := *original
			resigned.Header = original.Header.Clone()
			if err := r.Resign(&resigned, now); err != nil {
				t.Fatal(err)
			}
			if err := oracleVerify(t, pc.oracleRequest(&resigned, now)); err != nil {
				t.Fatalf("the provider's library refused the re-signed request: %v (the hour-old original: %v)\nheaders: %v", err, stale, resigned.Header)
			}
			t.Logf("hour-old original: %v; re-signed: accepted", stale)
		})
	}
}
