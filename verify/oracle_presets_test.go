package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// presetCase is one preset checked against its provider's npm library (see oracle_test.go).
type presetCase struct {
	preset      string
	signingKey  string // what hookgate's Sign takes: the secret, or the private key
	libraryKey  string // what the library takes: the secret, or the public key
	url         string
	contentType string
	extra       http.Header // headers the library insists on beside the signed ones
}

func presetCases(t *testing.T) []presetCase {
	t.Helper()
	whsec := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	const url = "https://hooks.example.test/in/provider?x=1"
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	spki, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	hmacCase := func(preset, secret string) presetCase {
		return presetCase{preset: preset, signingKey: secret, libraryKey: secret}
	}
	return []presetCase{
		hmacCase("stripe", "whsec_stripe_oracle"),
		hmacCase("github", "gh secret"),
		{preset: "shopify", signingKey: "shpss_oracle", libraryKey: "shpss_oracle", extra: oracleHeader(
			"X-Shopify-Topic", "orders/create", "X-Shopify-Shop-Domain", "oracle.myshopify.com",
			"X-Shopify-API-Version", "2025-10")},
		{preset: "twilio", signingKey: "twilio_token", libraryKey: "twilio_token", url: url, contentType: "application/x-www-form-urlencoded"},
		{preset: "twilio", signingKey: "twilio_token", libraryKey: "twilio_token", url: url, contentType: "application/json"},
		{preset: "hubspot", signingKey: "hubspot_secret", libraryKey: "hubspot_secret", url: url},
		hmacCase("standard", whsec),
		hmacCase("svix", whsec),
		hmacCase("workos", "wk_secret"),
		hmacCase("sanity", "sanity_secret"),
		hmacCase("slack", "slack_secret"),
		hmacCase("paddle", "pdl_ntfset_oracle"),
		hmacCase("linear", "lin_wh_secret"),
		{preset: "discord", signingKey: hex.EncodeToString(edPriv.Seed()), libraryKey: hex.EncodeToString(edPub)},
		{preset: "sendgrid", signingKey: base64.StdEncoding.EncodeToString(pkcs8), libraryKey: base64.StdEncoding.EncodeToString(spki)},
		{preset: "square", signingKey: "square_key", libraryKey: "square_key", url: url},
		hmacCase("mux", "mux_secret"),
		hmacCase("razorpay", "rzp_secret"),
		hmacCase("resend", whsec),
		{preset: "clerk", signingKey: whsec, libraryKey: whsec, url: url},
		hmacCase("openai", whsec),
		hmacCase("line", "line_secret"),
		hmacCase("gocardless", "gc_secret"),
		hmacCase("elevenlabs", "el_secret"),
		{preset: "box", signingKey: "box_key", libraryKey: "box_key", extra: oracleHeader(
			"Box-Signature-Version", "1", "Box-Signature-Algorithm", "HmacSHA256")},
	}
}

// TestPresetsAgainstProviderLibraries: for every preset whose provider publishes an npm library,
// the library accepts what hookgate's Sign produces; where the library can sign, hookgate accepts
// what it produces; and hookgate refuses either request with one character of the body, the
// signed timestamp or the signed event ID changed.
func TestPresetsAgainstProviderLibraries(t *testing.T) {
	useOracle(t)
	for _, pc := range presetCases(t) {
		t.Run(pc.preset+"/"+pc.contentType, func(t *testing.T) {
			c := mustPreset(t, pc.preset)
			keys := Keys{Secrets: []string{pc.libraryKey}}
			if c.publicKeyScheme() {
				keys = Keys{PublicKeys: []string{pc.libraryKey}}
			}
			v, err := NewFromKeys(c, keys)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			body := fmt.Sprintf(`{"id":"evt_%d","event_id":"evt_%[1]d","type":"test","note":"hello"}`, now.UnixNano())
			switch {
			case pc.preset == "linear": // its library trusts only this signed field's time
				body = fmt.Sprintf(`{"action":"create","type":"Issue","webhookTimestamp":%d}`, now.UnixMilli())
			case pc.contentType == "application/x-www-form-urlencoded":
				body = "Body=hello&From=%2B15551234567&To=%2B15557654321&MessageSid=SM" + fmt.Sprint(now.UnixNano())
			}

			ours := pc.message(body)
			if err := SignMessage(c, pc.signingKey, "msg_oracle_1", now, ours); err != nil {
				t.Fatal(err)
			}
			if err := oracleVerify(t, pc.oracleRequest(ours, now)); err != nil {
				t.Fatalf("the provider's library rejected hookgate's signature: %v\nheaders: %v", err, ours.Header)
			}
			messages := map[string]*Message{"signed by hookgate": ours}
			if theirs, ok := pc.librarySigned(t, body, now); ok {
				messages["signed by the library"] = theirs
			}
			for signer, m := range messages {
				if _, err := v.VerifyMessage(m, now); err != nil {
					t.Fatalf("%s: hookgate refused it: %v\nheaders: %v", signer, err, m.Header)
				}
				changed := *m
				changed.Body = []byte(flipMiddleByte(body))
				if _, err := v.VerifyMessage(&changed, now); err == nil {
					t.Errorf("%s: hookgate accepted a changed body", signer)
				}
				for _, signed := range signedValues(v.Config()) {
					changed := *m
					changed.Header = m.Header.Clone()
					signed.change(changed.Header)
					if _, err := v.VerifyMessage(&changed, now); kindOf(t, err) != SignatureMismatch {
						t.Errorf("%s: a changed %s: got %v, want a signature mismatch", signer, signed.what, err)
					}
				}
			}
		})
	}
}

// message is an unsigned request to the case's URL, with the headers the library insists on.
func (pc presetCase) message(body string) *Message {
	m := &Message{Header: http.Header{}, Body: []byte(body), Method: http.MethodPost, URL: pc.url}
	for name, values := range pc.extra {
		m.Header[name] = values
	}
	if pc.contentType != "" {
		m.Header.Set("Content-Type", pc.contentType)
	}
	return m
}

func (pc presetCase) oracleRequest(m *Message, now time.Time) oracleRequest {
	return oracleRequest{Provider: pc.preset, Secret: pc.libraryKey, Body: string(m.Body), ID: "msg_oracle_1",
		TimeMs: now.UnixMilli(), URL: m.URL, Method: m.Method, ContentType: pc.contentType, Headers: m.Header}
}

// librarySigned is the request the provider's library signs, if it can sign.
func (pc presetCase) librarySigned(t *testing.T, body string, now time.Time) (*Message, bool) {
	t.Helper()
	m := pc.message(body)
	req := pc.oracleRequest(m, now)
	req.Op = "sign"
	if resp := askOracle(t, req); !resp.OK {
		if resp.Error != "verify-only" {
			t.Fatalf("the library could not sign: %s", resp.Error)
		}
		return nil, false
	}
	headers, url := oracleSign(t, req)
	for name, values := range headers {
		m.Header[name] = values
	}
	m.URL = url
	return m, true
}
