package verify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
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

// Fixed keys for the public-key schemes, whose secretFor is the private key.
var (
	testEd25519  = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
	testECDSA, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
)

// mustVerifier verifies with secrets, or, for a public-key scheme, with the
// public keys of the private keys secretFor gives.
func mustVerifier(t testing.TB, c Config, secrets ...string) *Verifier {
	t.Helper()
	keys := Keys{Secrets: secrets}
	if c.publicKeyScheme() {
		keys = Keys{PublicKeys: publicKeysOf(t, c, secrets)}
	}
	v, err := NewFromKeys(c, keys)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

// publicKeysOf returns the public keys, as the provider publishes them, of secretFor's private keys.
func publicKeysOf(t testing.TB, c Config, privateKeys []string) []string {
	t.Helper()
	var keys []string
	for _, private := range privateKeys {
		if c.Algorithm == AlgorithmECDSAP256 {
			key, err := decodeECDSAPrivateKey(private)
			if err != nil {
				t.Fatal(err)
			}
			der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
			keys = append(keys, base64.StdEncoding.EncodeToString(der))
			continue
		}
		key, err := decodeEd25519PrivateKey(private)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, hex.EncodeToString(key.Public().(ed25519.PublicKey)))
	}
	return keys
}

// mustSign signs body as the provider would. A scheme that signs the URL is
// signed for the empty URL, which Verify supplies; Twilio's body is sent as
// a form, so its parameters are what is signed.
func mustSign(t testing.TB, c Config, secret, id string, ts time.Time, body []byte) http.Header {
	t.Helper()
	m := &Message{Body: body, Header: http.Header{}}
	if c.BodyHashParam != "" {
		m.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if err := SignMessage(c, secret, id, ts, m); err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return m.Header
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

// stripeItems are the stripe format's item names.
var stripeItems = keyedList{separator: ",", timestampKey: "t", signatureKey: "v1"}

func (l *signatureList) all() []string { return l.encoded[:l.count] }
