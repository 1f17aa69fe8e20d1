package verify

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"
)

// schemeMatrix returns one Config for every algorithm × encoding × format,
// keyed "format/algorithm/encoding", so tests and fuzz targets reach the
// combinations no preset uses (sha512 with base64, for one).
func schemeMatrix() map[string]Config {
	formats := map[string]Config{
		FormatSingle: {SignatureHeader: "X-Signature", Prefix: "sig=", IDHeader: "X-Event-Id"},
		FormatStripe: {SignatureHeader: "X-Signature", Format: FormatStripe, Signed: "{timestamp}.{body}"},
		FormatStandard: {SignatureHeader: "X-Signature", Format: FormatStandard, SecretEncoding: SecretWhsec,
			Signed: "{id}.{timestamp}.{body}", TimestampHeader: "X-Timestamp", IDHeader: "X-Event-Id"},
	}
	configs := map[string]Config{}
	for format, base := range formats {
		for _, algorithm := range []string{AlgorithmSHA1, AlgorithmSHA256, AlgorithmSHA512} {
			for _, encoding := range []string{EncodingHex, EncodingBase64} {
				c := base
				c.Algorithm, c.Encoding = algorithm, encoding
				configs[format+"/"+algorithm+"/"+encoding] = c
			}
		}
	}
	return configs
}

// withSignature returns h with its signature header carrying encoded in the
// layout of c's format.
func withSignature(c Config, h http.Header, signedAt time.Time, encoded string) http.Header {
	out := h.Clone()
	value := c.Prefix + encoded
	switch c.Format {
	case FormatStripe:
		value = "t=" + formatTimestamp(signedAt, UnitSeconds) + ",v1=" + encoded
	case FormatStandard:
		value = "v1," + encoded
	}
	out.Set(c.SignatureHeader, value)
	return out
}

// TestWrongLengthSignaturesAreRejected offers, for every algorithm ×
// encoding × format, signatures of wrong lengths and padding, among them
// an unpadded base64 text of the padded length (88 characters for sha512,
// which decodes to 66 bytes). Each must fail as a *Error, never panic.
func TestWrongLengthSignaturesAreRejected(t *testing.T) {
	signedAt := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	for name, c := range schemeMatrix() {
		t.Run(name, func(t *testing.T) {
			secret := secretFor(c)
			h := mustSign(t, c, secret, "evt_1", signedAt, body)
			v := mustVerifier(t, c, secret)
			if _, err := v.Verify(h, body, signedAt); err != nil {
				t.Fatalf("the right signature fails: %v", err)
			}
			size := v.macSize
			right := hex.EncodeToString(make([]byte, size))
			if c.Encoding == EncodingBase64 {
				right = base64.StdEncoding.EncodeToString(make([]byte, size))
			}
			padded := len(right)
			offers := map[string]string{
				"one short":                   right[:padded-1],
				"one long":                    right + "A",
				"double":                      right + right,
				"empty":                       "",
				"unpadded full length":        strings.Repeat("A", padded),
				"unpadded full length, slash": strings.Repeat("/", padded),
				"padding in the middle":       "==" + right[2:],
				"only padding":                strings.Repeat("=", padded),
				"longer by a block":           strings.Repeat("A", padded+4),
				"shorter by a block":          strings.Repeat("A", padded-4),
			}
			for what, encoded := range offers {
				_, err := v.Verify(withSignature(c, h, signedAt, encoded), body, signedAt)
				kind := kindOf(t, err)
				if kind != MalformedSignature && kind != SignatureMismatch && kind != MissingSignature {
					t.Errorf("%s (%q): got %v (%v), want a malformed or mismatched signature", what, encoded, kind, err)
				}
			}
		})
	}
}
