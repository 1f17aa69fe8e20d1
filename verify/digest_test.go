package verify

import (
	"crypto/sha256"
	"testing"
	"time"
)

func TestSignsHeader(t *testing.T) {
	cases := []struct {
		preset, header string
		want           bool
	}{
		{"standard", "webhook-id", true},
		{"standard", "WEBHOOK-TIMESTAMP", true},
		{"standard", "X-Other", false},
		{"github", "X-GitHub-Delivery", false}, // GitHub signs the body only
		{"shopify", "X-Shopify-Webhook-Id", false},
		{"slack", "X-Slack-Request-Timestamp", true},
		{"stripe", "Stripe-Signature", false},
		{"standard", "", false},
	}
	for _, tc := range cases {
		c := mustPreset(t, tc.preset)
		if got := c.SignsHeader(tc.header); got != tc.want {
			t.Errorf("%s: SignsHeader(%q) = %v, want %v", tc.preset, tc.header, got, tc.want)
		}
	}
}

// TestSignedDigestIsTheSignedMessage checks the digest against the signed
// bytes written out by hand, and that an unsigned header does not change it.
func TestSignedDigestIsTheSignedMessage(t *testing.T) {
	signedAt := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	cases := map[string]string{
		"github":   string(body),
		"shopify":  string(body),
		"stripe":   "1700000000." + string(body),
		"slack":    "v0:1700000000:" + string(body),
		"standard": "evt_1.1700000000." + string(body),
	}
	for name, message := range cases {
		t.Run(name, func(t *testing.T) {
			c := mustPreset(t, name)
			secret := secretFor(c)
			h := mustSign(t, c, secret, "evt_1", signedAt, body)
			v := mustVerifier(t, c, secret)
			result, err := v.Verify(h, body, signedAt)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.SignedDigest(result, body); got != sha256.Sum256([]byte(message)) {
				t.Fatalf("digest is not the SHA-256 of %q", message)
			}
			if c.IDHeader == "" || c.SignsHeader(c.IDHeader) {
				return
			}
			h.Set(c.IDHeader, "a fresh id")
			again, err := v.Verify(h, body, signedAt)
			if err != nil {
				t.Fatal(err)
			}
			if v.SignedDigest(again, body) != v.SignedDigest(result, body) {
				t.Fatal("an unsigned id header changed the digest")
			}
		})
	}
}
