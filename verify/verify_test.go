package verify

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestOneByteChangeFails(t *testing.T) {
	for _, vec := range loadVectors(t) {
		t.Run(vec.Scheme, func(t *testing.T) {
			c, h, body, now := vec.request(t)
			v := mustVerifier(t, c, vec.Secret)

			tamperedBody := []byte(flipLastByte(string(body)))
			_, err := v.Verify(h, tamperedBody, now)
			expectKind(t, err, SignatureMismatch)

			forged := h.Clone()
			forged.Set(c.SignatureHeader, flipMiddleByte(vec.SignatureHeader))
			_, err = v.Verify(forged, body, now)
			expectKind(t, err, SignatureMismatch)

			if vec.Timestamp == "" {
				return
			}
			later := unix(t, vec.Timestamp).Add(time.Second)
			shifted := h.Clone()
			if c.TimestampHeader != "" {
				shifted.Set(c.TimestampHeader, flipLastByte(vec.Timestamp))
			} else { // stripe: the timestamp lives in t=
				shifted.Set(c.SignatureHeader, strings.Replace(vec.SignatureHeader, "t="+vec.Timestamp, "t="+flipLastByte(vec.Timestamp), 1))
			}
			_, err = v.Verify(shifted, body, later)
			expectKind(t, err, SignatureMismatch)
		})
	}
}

func TestChangedIDFails(t *testing.T) {
	vec := vectorFor(t, "standard")
	c, h, body, now := vec.request(t)
	v := mustVerifier(t, c, vec.Secret)
	h.Set(c.IDHeader, flipLastByte(vec.ID))
	_, err := v.Verify(h, body, now)
	expectKind(t, err, SignatureMismatch)
}

func TestRotationAcceptsAnySecret(t *testing.T) {
	vec := vectorFor(t, "standard")
	c, h, body, now := vec.request(t)
	oldSecret := "whsec_" + "b2xkLXNlY3JldC1vbGQtc2VjcmV0LW9sZA=="
	v := mustVerifier(t, c, oldSecret, vec.Secret)
	if _, err := v.Verify(h, body, now); err != nil {
		t.Fatalf("signature made with the second secret rejected: %v", err)
	}
	onlyOld := mustVerifier(t, c, oldSecret)
	_, err := onlyOld.Verify(h, body, now)
	expectKind(t, err, SignatureMismatch)
}

func TestSeveralSignaturesOneRight(t *testing.T) {
	t.Run("standard", func(t *testing.T) {
		vec := vectorFor(t, "standard")
		c, h, body, now := vec.request(t)
		wrong := flipMiddleByte(vec.SignatureHeader)
		h.Set(c.SignatureHeader, wrong+" v1a,bm90IGEgcmVhbCBzaWduYXR1cmU= "+vec.SignatureHeader)
		if _, err := mustVerifier(t, c, vec.Secret).Verify(h, body, now); err != nil {
			t.Fatalf("list with one right signature rejected: %v", err)
		}
		h.Set(c.SignatureHeader, wrong+" v1a,"+strings.TrimPrefix(vec.SignatureHeader, "v1,"))
		_, err := mustVerifier(t, c, vec.Secret).Verify(h, body, now)
		expectKind(t, err, SignatureMismatch)
	})
	t.Run("stripe", func(t *testing.T) {
		vec := vectorFor(t, "stripe")
		c, h, body, now := vec.request(t)
		right := strings.SplitN(vec.SignatureHeader, "v1=", 2)[1]
		wrong := flipMiddleByte(right)
		h.Set(c.SignatureHeader, "t="+vec.Timestamp+",v1="+wrong+",v1="+right+",v0="+wrong)
		if _, err := mustVerifier(t, c, vec.Secret).Verify(h, body, now); err != nil {
			t.Fatalf("repeated v1 with one right signature rejected: %v", err)
		}
	})
	t.Run("single format, several header lines", func(t *testing.T) {
		vec := vectorFor(t, "github")
		c, h, body, now := vec.request(t)
		h.Set(c.SignatureHeader, flipMiddleByte(vec.SignatureHeader))
		h.Add(c.SignatureHeader, vec.SignatureHeader)
		if _, err := mustVerifier(t, c, vec.Secret).Verify(h, body, now); err != nil {
			t.Fatalf("second header line with the right signature rejected: %v", err)
		}
	})
}

func TestStripeV0OnlyFails(t *testing.T) {
	vec := vectorFor(t, "stripe")
	c, h, body, now := vec.request(t)
	right := strings.SplitN(vec.SignatureHeader, "v1=", 2)[1]
	h.Set(c.SignatureHeader, "t="+vec.Timestamp+",v0="+right)
	_, err := mustVerifier(t, c, vec.Secret).Verify(h, body, now)
	expectKind(t, err, MissingSignature)
}

func TestMalformedAndMissingSignature(t *testing.T) {
	vec := vectorFor(t, "github")
	c, _, body, now := vec.request(t)
	v := mustVerifier(t, c, vec.Secret)
	hexPart := strings.TrimPrefix(vec.SignatureHeader, "sha256=")
	cases := []struct {
		name  string
		value []string
		want  ErrorKind
	}{
		{"absent", nil, MissingSignature},
		{"empty", []string{""}, MissingSignature},
		{"empty after prefix", []string{"sha256="}, MissingSignature},
		{"no prefix", []string{hexPart}, MalformedSignature},
		{"not hex", []string{"sha256=" + strings.Repeat("zz", 32)}, MalformedSignature},
		{"too short", []string{"sha256=" + hexPart[:62]}, MalformedSignature},
		{"too long", []string{"sha256=" + hexPart + "00"}, MalformedSignature},
		{"too many", repeat(vec.SignatureHeader, maxSignatures+1), MalformedSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, value := range tc.value {
				h.Add(c.SignatureHeader, value)
			}
			_, err := v.Verify(h, body, now)
			expectKind(t, err, tc.want)
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestMissingIDAndTimestamp(t *testing.T) {
	vec := vectorFor(t, "standard")
	c, h, body, now := vec.request(t)
	v := mustVerifier(t, c, vec.Secret)

	noID := h.Clone()
	noID.Del(c.IDHeader)
	_, err := v.Verify(noID, body, now)
	expectKind(t, err, MissingID)

	noTimestamp := h.Clone()
	noTimestamp.Del(c.TimestampHeader)
	_, err = v.Verify(noTimestamp, body, now)
	expectKind(t, err, MissingTimestamp)

	stripe := vectorFor(t, "stripe")
	sc, sh, sbody, snow := stripe.request(t)
	sh.Set(sc.SignatureHeader, strings.TrimPrefix(stripe.SignatureHeader, "t="+stripe.Timestamp+","))
	_, err = mustVerifier(t, sc, stripe.Secret).Verify(sh, sbody, snow)
	expectKind(t, err, MissingTimestamp)
}

func TestHeaderNamesAreCaseInsensitive(t *testing.T) {
	vec := vectorFor(t, "standard")
	c, _, body, now := vec.request(t)
	h := http.Header{} // as a server would store them, canonicalized
	h.Set("WEBHOOK-SIGNATURE", vec.SignatureHeader)
	h.Set("Webhook-Timestamp", vec.Timestamp)
	h.Set("webhook-id", vec.ID)
	if _, err := mustVerifier(t, c, vec.Secret).Verify(h, body, now); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func TestConcurrentVerify(t *testing.T) {
	vec := vectorFor(t, "standard")
	c, h, body, now := vec.request(t)
	v := mustVerifier(t, c, "whsec_"+"c2Vjb25kLXNlY3JldA==", vec.Secret)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if _, err := v.Verify(h, body, now); err != nil {
					t.Errorf("Verify: %v", err)
					return
				}
				var verr *Error
				if _, err := v.Verify(h, body[1:], now); !errors.As(err, &verr) || verr.Kind != SignatureMismatch {
					t.Errorf("tampered body: got %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}
