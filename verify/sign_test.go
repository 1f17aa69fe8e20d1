package verify

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"
)

// seedConfigs are the two house formats expressed as generic Configs.
func seedConfigs() map[string]Config {
	return map[string]Config{
		"seed_task_callback": {
			Scheme:          "generic",
			SignatureHeader: "x-webhook-signature",
			Prefix:          "sha256=",
			Encoding:        EncodingHex,
			Signed:          "{timestamp}.{body}",
			TimestampHeader: "x-webhook-timestamp",
			TimestampUnit:   UnitSeconds,
			IDHeader:        "x-webhook-id",
		},
		"seed_platform": { // its millisecond X-Webhook-Timestamp is not signed, so it is not configured
			Scheme:          "generic",
			SignatureHeader: "X-Webhook-Signature",
			Prefix:          "sha256=",
			Encoding:        EncodingHex,
			Signed:          "{body}",
			IDHeader:        "X-Webhook-ID",
		},
	}
}

// secretFor returns a secret written in the scheme's SecretEncoding, or the
// private key of a public-key scheme (see mustVerifier).
func secretFor(c Config) string {
	switch {
	case c.Algorithm == AlgorithmEd25519:
		return hex.EncodeToString(testEd25519.Seed())
	case c.Algorithm == AlgorithmECDSAP256:
		der, _ := x509.MarshalPKCS8PrivateKey(testECDSA)
		return base64.StdEncoding.EncodeToString(der)
	}
	switch c.SecretEncoding {
	case SecretWhsec:
		return "whsec_" + "cm91bmQtdHJpcC1zZWNyZXQtZm9yLXRlc3Rz"
	case SecretBase64:
		return "cm91bmQtdHJpcC1zZWNyZXQ="
	default:
		return "round-trip-secret"
	}
}

func roundTripConfigs(t *testing.T) map[string]Config {
	configs := seedConfigs()
	for _, name := range PresetNames() {
		c := mustPreset(t, name)
		if name == "generic" {
			c.SignatureHeader = "X-Signature"
		}
		configs[name] = c
	}
	return configs
}

func TestSignVerifyRoundTrip(t *testing.T) {
	signedAt := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"evt_1","data":{"task_id":"t1","version":3}}`)
	for name, c := range roundTripConfigs(t) {
		t.Run(name, func(t *testing.T) {
			secret := secretFor(c)
			h := mustSign(t, c, secret, "evt_1", signedAt, body)
			v := mustVerifier(t, c, secret)
			result, err := v.Verify(h, body, signedAt.Add(time.Minute))
			if err != nil {
				t.Fatalf("Verify of a freshly signed request: %v (headers %v)", err, h)
			}
			if c.IDHeader != "" && result.ID != "evt_1" {
				t.Errorf("ID = %q, want evt_1", result.ID)
			}
			hasTimestamp := c.TimestampHeader != "" || c.timestampInSignatureHeader()
			if hasTimestamp != !result.Timestamp.IsZero() {
				t.Errorf("Timestamp = %v; scheme has a signed timestamp: %v", result.Timestamp, hasTimestamp)
			}
			_, err = v.Verify(h, append([]byte(nil), append(body, ' ')...), signedAt)
			expectKind(t, err, SignatureMismatch)
		})
	}
}

func TestSignAlgorithmsAndEncodings(t *testing.T) {
	for _, algorithm := range []string{AlgorithmSHA1, AlgorithmSHA256, AlgorithmSHA512} {
		for _, encoding := range []string{EncodingHex, EncodingBase64} {
			c := Config{SignatureHeader: "X-Sig", Algorithm: algorithm, Encoding: encoding, SecretEncoding: SecretBase64}
			h := mustSign(t, c, "a2V5", "", time.Time{}, []byte("body"))
			if _, err := mustVerifier(t, c, "a2V5").Verify(h, []byte("body"), time.Now()); err != nil {
				t.Errorf("%s/%s: %v", algorithm, encoding, err)
			}
		}
	}
}

func TestSignHeaders(t *testing.T) {
	signedAt := time.Unix(1_700_000_000, 0)
	standard := mustSign(t, mustPreset(t, "standard"), secretFor(mustPreset(t, "standard")), "msg_1", signedAt, []byte("x"))
	wantKeys(t, standard, "Webhook-Signature", "Webhook-Timestamp", "Webhook-Id")
	if !strings.HasPrefix(standard.Get("Webhook-Signature"), "v1,") {
		t.Errorf("standard signature %q lacks v1,", standard.Get("Webhook-Signature"))
	}
	stripe := mustSign(t, mustPreset(t, "stripe"), "whsec_x", "", signedAt, []byte("x"))
	wantKeys(t, stripe, "Stripe-Signature")
	if !strings.HasPrefix(stripe.Get("Stripe-Signature"), "t=1700000000,v1=") {
		t.Errorf("stripe signature %q", stripe.Get("Stripe-Signature"))
	}
	github := mustSign(t, mustPreset(t, "github"), "s", "d-1", signedAt, []byte("x"))
	wantKeys(t, github, "X-Hub-Signature-256", "X-Github-Delivery")
}

func wantKeys(t *testing.T, h http.Header, keys ...string) {
	t.Helper()
	if len(h) != len(keys) {
		t.Errorf("headers %v, want exactly %v", h, keys)
	}
	for _, key := range keys {
		if h.Get(key) == "" {
			t.Errorf("header %s missing from %v", key, h)
		}
	}
}

func TestSignRefusals(t *testing.T) {
	standard := mustPreset(t, "standard")
	if _, err := Sign(standard, secretFor(standard), "", time.Now(), nil); err == nil {
		t.Error("Sign without the id the template signs: want an error")
	}
	if _, err := Sign(standard, secretFor(standard), "msg", time.Unix(-1, 0), nil); err == nil {
		t.Error("Sign with a pre-1970 timestamp: want an error")
	}
	if _, err := Sign(Config{}, "s", "", time.Now(), nil); err == nil {
		t.Error("Sign with an invalid config: want an error")
	}
}

// TestSignReproducesPublishedEd25519Signatures: Ed25519 is deterministic, so signing the
// published examples with their private keys must give the published signatures byte for byte.
func TestSignReproducesPublishedEd25519Signatures(t *testing.T) {
	standard := mustPreset(t, "standard")
	h, err := Sign(standard, "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==",
		"msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Get("Webhook-Signature"), "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg=="; got != want {
		t.Errorf("standard v1a: %s, want %s", got, want)
	}
	discord := mustPreset(t, "discord")
	h, err = Sign(discord, strings.Repeat("01", 32), "", time.Unix(1700000000, 0), []byte(`{"id":"evt_1","type":"test"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Get("X-Signature-Ed25519"), "cc5d21c5af68e4485c083cde91188fd6a287515414f6efa090f83846fc3892c6f7844f372cdda93d350d5315de035e7946a07694f11ee8b8606aaa53cab82b05"; got != want {
		t.Errorf("discord: %s, want %s", got, want)
	}
}

// TestStandardFormatTakesSecretsAndPublicKeysTogether: a Standard Webhooks route configured with
// both accepts a v1 (HMAC) and a v1a (Ed25519) signature, and refuses each forged kind.
func TestStandardFormatTakesSecretsAndPublicKeysTogether(t *testing.T) {
	c := mustPreset(t, "standard")
	secret := secretFor(c)
	signingKey := "whsk_" + base64.StdEncoding.EncodeToString(testEd25519.Seed())
	publicKey := "whpk_" + base64.StdEncoding.EncodeToString(testEd25519.Public().(ed25519.PublicKey))
	v, err := NewFromKeys(c, Keys{Secrets: []string{secret}, PublicKeys: []string{publicKey}})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"test"}`)
	now := time.Now()
	for _, key := range []string{secret, signingKey} {
		h := mustSign(t, c, key, "msg_1", now, body)
		if _, err := v.Verify(h, body, now); err != nil {
			t.Errorf("%.6s...: %v", h.Get("Webhook-Signature"), err)
		}
		if _, err := v.Verify(h, []byte(`{"type":"forged"}`), now); kindOf(t, err) != SignatureMismatch {
			t.Errorf("%.6s... over a forged body: %v", h.Get("Webhook-Signature"), err)
		}
	}
	hmacOnly := mustVerifier(t, c, secret)
	h := mustSign(t, c, signingKey, "msg_1", now, body)
	if _, err := hmacOnly.Verify(h, body, now); kindOf(t, err) != MissingSignature {
		t.Errorf("a v1a signature on a route without public keys: %v, want missing signature", err)
	}
}
