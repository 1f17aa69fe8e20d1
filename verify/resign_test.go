package verify

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// How each preset (and the house formats) takes re-signing: refreshed with a new timestamp,
// left as it is (no signed timestamp), or refused (a private key or the body would have to change).
var (
	resignRefreshes = []string{
		"box", "clerk", "elevenlabs", "hubspot", "mux", "openai", "paddle", "resend", "sanity",
		"seed_task_callback", "slack", "standard", "stripe", "svix", "twitch", "workos", "zoom",
	}
	resignRefused = map[string]string{
		"discord":  "provider's private key",
		"sendgrid": "provider's private key",
		"linear":   "inside the body",
	}
)

// Every scheme with a signed timestamp in its headers is re-signed in its provider's exact format:
// a request signed an hour ago, refused by a verifier with a 1 s window, passes it once re-signed
// now, with the id it was signed with. Schemes without a signed timestamp are left byte for byte.
func TestResignEveryPreset(t *testing.T) {
	signedAt := time.Now().Add(-time.Hour).Truncate(time.Second)
	body := []byte(`{"id":"evt_1","data":{"task_id":"t1","version":3}}`)
	var refreshed []string
	for name, c := range roundTripConfigs(t) {
		t.Run(name, func(t *testing.T) {
			secret := secretFor(c)
			if c.publicKeyScheme() {
				secret = "" // a route verifying with public keys has no secret to re-sign with
			}
			r, err := NewResigner(c, secret)
			if want, refused := resignRefused[name]; refused {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("NewResigner = %v, want a refusal saying %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewResigner: %v", err)
			}
			m := &Message{Header: http.Header{}, Body: body, Method: http.MethodPost, URL: "https://hooks.example.com/hook?x=1"}
			if c.BodyHashParam != "" {
				m.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			if err := SignMessage(c, secret, "evt_1", signedAt, m); err != nil {
				t.Fatalf("SignMessage: %v", err)
			}
			if headers := c.signatureHeaders(); len(headers) > 1 {
				m.Header.Set(headers[1], "c3RhbGUgc2Vjb25kYXJ5") // Box's secondary, signed with the old timestamp
			}
			original := m.Header.Clone()
			c.Tolerance = time.Second
			v := mustVerifier(t, c, secret)
			now := time.Now()

			if err := r.Resign(m, now); err != nil {
				t.Fatalf("Resign: %v", err)
			}
			if !r.Refreshes() {
				if !headersEqual(m.Header, original) {
					t.Fatalf("a scheme without a signed timestamp was changed: %v, was %v", m.Header, original)
				}
				return
			}
			refreshed = append(refreshed, name)
			stale := &Message{Header: original, Body: body, Method: m.Method, URL: m.URL}
			expectKind(t, verifyErr(v, stale, now), StaleTimestamp)
			if err := verifyErr(v, m, now); err != nil {
				t.Fatalf("the re-signed request fails its own scheme's check: %v (headers %v)", err, m.Header)
			}
			if c.IDHeader != "" && m.Header.Get(c.IDHeader) != original.Get(c.IDHeader) {
				t.Errorf("id header %s = %q, want the original %q", c.IDHeader, m.Header.Get(c.IDHeader), original.Get(c.IDHeader))
			}
			if headers := c.signatureHeaders(); len(headers) > 1 && m.Header.Get(headers[1]) != "" {
				t.Errorf("the stale %s was kept", headers[1])
			}
		})
	}
	slices.Sort(refreshed)
	if !slices.Equal(refreshed, resignRefreshes) {
		t.Errorf("re-signed schemes = %v, want %v", refreshed, resignRefreshes)
	}
}

// The standard format verified with public keys alone (v1a) has no secret to re-sign with.
func TestResignRefusesStandardWithoutSecret(t *testing.T) {
	_, err := NewResigner(mustPreset(t, "standard"), "")
	if err == nil || !strings.Contains(err.Error(), "private key") {
		t.Fatalf("NewResigner = %v, want a refusal naming the provider's private key", err)
	}
}

// A bad secret is refused up front, without being echoed.
func TestResignRefusesBadSecretWithoutEchoingIt(t *testing.T) {
	_, err := NewResigner(mustPreset(t, "svix"), "whsec_!!not-base64-sekrit")
	if err == nil || strings.Contains(err.Error(), "sekrit") {
		t.Fatalf("NewResigner = %v, want a refusal that does not echo the secret", err)
	}
}

func verifyErr(v *Verifier, m *Message, now time.Time) error {
	_, err := v.VerifyMessage(m, now)
	return err
}

func headersEqual(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for name, values := range a {
		if !slices.Equal(values, b[name]) {
			return false
		}
	}
	return true
}

// A request the provider signed an hour ago, re-signed now, passes the provider's own npm
// library (its freshness window included) for every preset the oracle knows that resign
// refreshes; the original, an hour old, is refused by the libraries that check the time.
func TestResignedRequestsPassProviderLibraries(t *testing.T) {
	useOracle(t)
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
