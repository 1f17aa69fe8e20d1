package verify

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

func mustPreset(t testing.TB, name string) Config {
	t.Helper()
	c, ok := Preset(name)
	if !ok {
		t.Fatalf("no preset %q", name)
	}
	return c
}

func mustVerifier(t testing.TB, c Config, secrets ...string) *Verifier {
	t.Helper()
	v, err := New(c, secrets)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

func mustSign(t testing.TB, c Config, secret, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	h, err := Sign(c, secret, id, ts, body)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return h
}

// kindOf returns the ErrorKind of a verification error, 0 for nil, and fails
// the test for any other error type.
func kindOf(t testing.TB, err error) ErrorKind {
	t.Helper()
	if err == nil {
		return 0
	}
	var verr *Error
	if !errors.As(err, &verr) {
		t.Fatalf("error %v (%T) is not a *verify.Error", err, err)
	}
	return verr.Kind
}

func expectKind(t testing.TB, err error, want ErrorKind) {
	t.Helper()
	if got := kindOf(t, err); got != want {
		t.Fatalf("got %v (%v), want %v", got, err, want)
	}
}

// flipLastByte returns s with its final character changed to another
// character of the same alphabet class (hex digit stays hex, and so on).
func flipLastByte(s string) string {
	b := []byte(s)
	i := len(b) - 1
	for b[i] == '=' {
		i--
	}
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	return string(b)
}

// flipMiddleByte changes one character in the middle of s to another
// character valid in both hex and base64.
func flipMiddleByte(s string) string {
	b := []byte(s)
	i := len(b) / 2
	if b[i] == 'a' {
		b[i] = 'b'
	} else {
		b[i] = 'a'
	}
	return string(b)
}
