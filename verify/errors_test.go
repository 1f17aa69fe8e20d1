package verify

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// expectedSignature is what a receiver would compute for body: the value an
// error message must never reveal.
func expectedSignature(t *testing.T, c Config, secret, id string, ts time.Time, body []byte) string {
	t.Helper()
	value := mustSign(t, c, secret, id, ts, body).Get(c.SignatureHeader)
	for _, marker := range []string{"v1=", "v1,", c.Prefix} {
		if i := strings.LastIndex(value, marker); marker != "" && i >= 0 {
			value = value[i+len(marker):]
		}
	}
	return value
}

func TestErrorsRevealNoSecretOrExpectedSignature(t *testing.T) {
	for _, vec := range loadVectors(t) {
		t.Run(vec.Scheme, func(t *testing.T) {
			c, h, body, now := vec.request(t)
			v := mustVerifier(t, c, vec.Secret)
			tampered := append([]byte("x"), body...)
			forbidden := []string{
				vec.Secret,
				strings.TrimPrefix(vec.Secret, "whsec_"),
				expectedSignature(t, c, vec.Secret, vec.ID, now, tampered),
				expectedSignature(t, c, vec.Secret, vec.ID, now, body),
			}
			if key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(vec.Secret, "whsec_")); err == nil && c.SecretEncoding == SecretWhsec {
				forbidden = append(forbidden, string(key))
			}

			var failures []error
			_, err := v.Verify(h, tampered, now)
			failures = append(failures, err)
			if vec.Timestamp != "" {
				_, err = v.Verify(h, body, now.Add(time.Hour))
				failures = append(failures, err)
			}
			garbled := h.Clone()
			garbled.Set(c.SignatureHeader, vec.SignatureHeader+"zz")
			_, err = v.Verify(garbled, body, now)
			failures = append(failures, err)

			for _, failure := range failures {
				if failure == nil {
					t.Fatal("expected a failure")
				}
				message := failure.Error()
				if message == "" {
					t.Fatal("empty error message")
				}
				for _, secret := range forbidden {
					if strings.Contains(message, secret) {
						t.Fatalf("error %q reveals %q", message, secret)
					}
				}
			}
		})
	}
}

func TestNewErrorsRevealNoSecret(t *testing.T) {
	secret := "whsec_THIS-IS-THE-SECRET!"
	_, err := New(mustPreset(t, "standard"), []string{secret})
	if err == nil {
		t.Fatal("New accepted a secret that is not base64")
	}
	if strings.Contains(err.Error(), "THIS-IS-THE-SECRET") {
		t.Fatalf("error %q reveals the secret", err)
	}
}

func TestErrorKindNames(t *testing.T) {
	for kind := MissingSignature; kind <= MissingID; kind++ {
		if name := kind.String(); name == "" || strings.Contains(name, "unknown") {
			t.Errorf("kind %d has no name", int(kind))
		}
	}
}
