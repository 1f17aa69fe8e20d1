package verify

import (
	"strings"
	"testing"
	"time"
)

func TestToleranceBothDirections(t *testing.T) {
	for _, scheme := range []string{"standard", "stripe", "slack"} {
		t.Run(scheme, func(t *testing.T) {
			vec := vectorFor(t, scheme)
			c, h, body, signedAt := vec.request(t)
			v := mustVerifier(t, c, vec.Secret)
			cases := []struct {
				offset time.Duration
				want   ErrorKind
			}{
				{-6 * time.Minute, FutureTimestamp}, // receiver clock behind: timestamp 6m ahead
				{-5 * time.Minute, 0},
				{-4 * time.Minute, 0},
				{4 * time.Minute, 0},
				{5 * time.Minute, 0},
				{6 * time.Minute, StaleTimestamp},
			}
			for _, tc := range cases {
				_, err := v.Verify(h, body, signedAt.Add(tc.offset))
				if got := kindOf(t, err); got != tc.want {
					t.Errorf("now = signed %+v: got %v (%v), want %v", tc.offset, got, err, tc.want)
				}
			}
		})
	}
}

func TestCustomTolerance(t *testing.T) {
	c := mustPreset(t, "standard")
	c.Tolerance = 30 * time.Second
	signedAt := time.Unix(1_700_000_000, 0)
	h := mustSign(t, c, "whsec_"+"dG9sZXJhbmNlLXNlY3JldA==", "msg_1", signedAt, []byte("{}"))
	v := mustVerifier(t, c, "whsec_"+"dG9sZXJhbmNlLXNlY3JldA==")
	if _, err := v.Verify(h, []byte("{}"), signedAt.Add(29*time.Second)); err != nil {
		t.Fatalf("within 30s: %v", err)
	}
	_, err := v.Verify(h, []byte("{}"), signedAt.Add(31*time.Second))
	expectKind(t, err, StaleTimestamp)
}

func TestMillisecondTimestamps(t *testing.T) {
	c := Config{
		SignatureHeader: "X-Signature",
		Prefix:          "sha256=",
		Signed:          "{timestamp}.{body}",
		TimestampHeader: "X-Timestamp",
		TimestampUnit:   UnitMilliseconds,
	}
	secret := "ms-secret"
	signedAt := time.UnixMilli(1_700_000_000_123)
	body := []byte(`{"ok":true}`)
	h := mustSign(t, c, secret, "", signedAt, body)
	if got := h.Get("X-Timestamp"); got != "1700000000123" {
		t.Fatalf("X-Timestamp = %q, want milliseconds 1700000000123", got)
	}
	v := mustVerifier(t, c, secret)
	result, err := v.Verify(h, body, signedAt.Add(4*time.Minute))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !result.Timestamp.Equal(signedAt) {
		t.Fatalf("Timestamp = %v, want %v", result.Timestamp, signedAt)
	}
	_, err = v.Verify(h, body, signedAt.Add(6*time.Minute))
	expectKind(t, err, StaleTimestamp)
	_, err = v.Verify(h, body, signedAt.Add(-6*time.Minute))
	expectKind(t, err, FutureTimestamp)
}

func TestMalformedTimestamp(t *testing.T) {
	vec := vectorFor(t, "slack")
	c, h, body, now := vec.request(t)
	v := mustVerifier(t, c, vec.Secret)
	for _, bad := range []string{"abc", "1531420618a", "-1531420618", "+1531420618", "1531420618.0", "1e9", "99999999999999999999"} {
		h.Set(c.TimestampHeader, bad)
		_, err := v.Verify(h, body, now)
		if kindOf(t, err) != MalformedTimestamp {
			t.Errorf("timestamp %q: got %v, want %v", bad, err, MalformedTimestamp)
		}
	}

	stripe := vectorFor(t, "stripe")
	sc, sh, sbody, snow := stripe.request(t)
	sh.Set(sc.SignatureHeader, strings.Replace(stripe.SignatureHeader, "t="+stripe.Timestamp, "t=soon", 1))
	_, err := mustVerifier(t, sc, stripe.Secret).Verify(sh, sbody, snow)
	expectKind(t, err, MalformedTimestamp)
}

func TestStaleButValidSignatureReportsStale(t *testing.T) {
	vec := vectorFor(t, "stripe")
	c, h, body, signedAt := vec.request(t)
	result, err := mustVerifier(t, c, vec.Secret).Verify(h, body, signedAt.Add(time.Hour))
	expectKind(t, err, StaleTimestamp)
	if result != (Result{}) {
		t.Fatalf("a failed verification returned %+v, want a zero Result", result)
	}
	// A wrong signature is reported as a mismatch, whatever its age.
	_, err = mustVerifier(t, c, vec.Secret).Verify(h, body[1:], signedAt.Add(time.Hour))
	expectKind(t, err, SignatureMismatch)
}
