package verify

import (
	"strings"
	"testing"
	"time"
)

func TestPortVariant(t *testing.T) {
	for in, want := range map[string]string{
		"https://example.com:8443/hook?a=1": "https://example.com/hook?a=1",
		"https://example.com/hook":          "https://example.com:443/hook",
		"http://example.com/hook":           "http://example.com:80/hook",
		"https://user:pw@example.com:1/h":   "https://example.com/h",
		"https://[::1]:8443/hook":           "https://[::1]/hook",
		"https://[::1]/hook":                "https://[::1]:443/hook",
	} {
		if got, ok := portVariant(in); !ok || got != want {
			t.Errorf("portVariant(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if _, ok := portVariant("/relative"); ok {
		t.Error("a relative URL has no variant")
	}
}

// TestOnlyTwoPublicKeySignaturesAreChecked: a request may offer many public-key signatures, each
// costing a verification per key, so only the first two are checked (providers send one per
// signing key: one, or two while rotating) — a genuine third one is not looked at.
func TestOnlyTwoPublicKeySignaturesAreChecked(t *testing.T) {
	c := mustPreset(t, "discord")
	v := mustVerifier(t, c, secretFor(c))
	body := []byte(`{"type":2,"id":"1"}`)
	now := time.Now()
	h := mustSign(t, c, secretFor(c), "", now, body)
	genuine := h.Get("X-Signature-Ed25519")
	forged := strings.Repeat("ab", 64)
	for _, offered := range [][]string{{genuine}, {forged, genuine}, {forged, forged, genuine}} {
		h["X-Signature-Ed25519"] = offered
		_, err := v.Verify(h, body, now)
		if accepted, want := err == nil, len(offered) <= maxAsymmetricSignatures; accepted != want {
			t.Errorf("the genuine signature at position %d: accepted %v, want %v (%v)", len(offered), accepted, want, err)
		}
	}
}
