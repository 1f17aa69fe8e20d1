package caddymodule

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// ecdsaPair is a new P-256 key pair: the private key in base64 PKCS #8, the public key in base64
// SPKI, as SendGrid gives it.
func ecdsaPair(t *testing.T) hooktest.KeyPair {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	private, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	public, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return hooktest.KeyPair{Private: base64.StdEncoding.EncodeToString(private), Public: base64.StdEncoding.EncodeToString(public)}
}

// Discord (Ed25519, hex key) and SendGrid (ECDSA P-256, base64 SPKI key) verify with the
// provider's public key, as do the v1a signatures of Standard Webhooks (whpk_ keys): an event
// signed with the private key goes through, one signed with another key is refused.
func TestPublicKeySchemesEndToEnd(t *testing.T) {
	seed := []byte("hookgate-test-standard-v1a-seed!")
	v1a := ed25519.NewKeyFromSeed(seed)
	for name, tc := range map[string]struct {
		preset     string
		key, other hooktest.KeyPair
		id, body   string
		secretToo  bool // the route keeps its HMAC secret beside the public key
	}{
		"discord":  {"discord", hooktest.Ed25519Pair("hookgate-test-discord-event-key!"), hooktest.Ed25519Pair("hookgate-test-someone-elses-key!"), "", `{"id":"pk_discord_1","type":2,"data":{"name":"hi"}}`, false},
		"sendgrid": {"sendgrid", ecdsaPair(t), ecdsaPair(t), "", `[{"email":"a@example.com","event":"delivered","sg_event_id":"pk_sendgrid_1"}]`, false},
		"standard v1a": {"standard",
			hooktest.KeyPair{Private: "whsk_" + base64.StdEncoding.EncodeToString(seed), Public: "whpk_" + base64.StdEncoding.EncodeToString(v1a.Public().(ed25519.PublicKey))},
			hooktest.Ed25519Pair("hookgate-test-someone-elses-key!"), "pk_standard_1", `{"type":"test"}`, true},
	} {
		t.Run(name, func(t *testing.T) {
			up := hooktest.NewUpstream(t)
			route := "pk_" + strings.ReplaceAll(name, " ", "_")
			cfg := presetGatewayConfig(tc.preset, route, up.Listener.Addr().String(), "public_key "+tc.key.Public)
			if !tc.secretToo {
				cfg = strings.Replace(cfg, "secret  {env.HOOKGATE_TEST_SECRET}", "", 1)
			}
			tester := caddytest.NewTester(t)
			tester.InitServer(cfg, "caddyfile")
			url := "http://localhost:9080/hooks/" + route

			forged := signRequest(t, tc.preset, tc.other.Private, tc.id, url, "application/json", tc.body, nil)
			hooktest.ExpectReply(t, "signed with another key", sendSigned(t, tester.Client, forged, ""), http.StatusUnauthorized, "signature")
			genuine := signRequest(t, tc.preset, tc.key.Private, tc.id, url, "application/json", tc.body, nil)
			hooktest.ExpectReply(t, "signed with the provider's key", sendSigned(t, tester.Client, genuine, ""), http.StatusOK, "upstream says hi")
			if got := up.Headers[0].Get("Hookgate-Verified"); got != tc.preset {
				t.Fatalf("Hookgate-Verified %q, want %s", got, tc.preset)
			}
		})
	}
}

// Keys of the wrong kind, a public_url no scheme uses, and sources that cannot be are refused at
// load, saying what to set.
func TestPublicKeyAndURLProvisionErrors(t *testing.T) {
	t.Setenv("HOOKGATE_UNIT_SECRET", "s3cr3t-value")
	discordKey := hooktest.Ed25519Pair("hookgate-test-discord-event-key!").Public
	for name, tc := range map[string]struct {
		h       Handler
		wantErr string
	}{
		"discord with a secret":         {Handler{Preset: "discord", Secrets: []string{"{env.HOOKGATE_UNIT_SECRET}"}}, "set public_key, not secret"},
		"discord with no key":           {Handler{Preset: "discord"}, "no public key configured"},
		"sendgrid with a bad key":       {Handler{Preset: "sendgrid", PublicKeys: []string{"not-a-key"}}, "not a P-256 ECDSA public key"},
		"discord with an unset key":     {Handler{Preset: "discord", PublicKeys: []string{"{env.HOOKGATE_NOT_SET_ANYWHERE}"}}, "public_key #1"},
		"github with a public key":      {Handler{Preset: "github", PublicKeys: []string{discordKey}}, "set secret, not public_key"},
		"public_url on stripe":          {Handler{Preset: "stripe", Secrets: []string{"x"}, PublicURL: "https://hooks.example.com"}, "does not sign the URL"},
		"public_url without a scheme":   {Handler{Preset: "twilio", Secrets: []string{"x"}, PublicURL: "hooks.example.com/twilio"}, "not an absolute http or https URL"},
		"zoom without a secret":         {Handler{Preset: "zoom"}, "no secret configured"},
		"discord key on the wrong algo": {Handler{Preset: "discord", Overrides: verify.Overrides{Algorithm: "sha256"}, PublicKeys: []string{discordKey}}, "set secret, not public_key"},
	} {
		t.Run(name, func(t *testing.T) {
			expectProvisionRefused(t, tc.h, tc.wantErr, "s3cr3t-value")
		})
	}
	h := Handler{Version: &VersionSource{Entity: Source{From: "body_sha256"}, Version: Source{From: "json", Name: "v"}}}
	if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "must be `header NAME` or `json PATH`") {
		t.Fatalf("version entity from body_sha256: %v, want it refused", err)
	}
}

func TestUnmarshalCaddyfileKeysURLAndHandshake(t *testing.T) {
	var got Handler
	err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`hookgate {
		preset        twilio
		public_key    {env.K1}
		public_key    {file./run/k2}
		public_url    https://hooks.example.com
		handshake     off
		signature_key v0
		id            body_sha256
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Handler{Preset: "twilio", PublicKeys: []string{"{env.K1}", "{file./run/k2}"}, PublicURL: "https://hooks.example.com",
		HandshakeOff: true, Overrides: verify.Overrides{SignatureKey: "v0"}, ID: &Source{From: "body_sha256"}}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("got  %s\nwant %s", gotJSON, wantJSON)
	}
	if !strings.Contains(string(gotJSON), `"id":{"from":"body_sha256"}`) || !strings.Contains(string(gotJSON), `"public_keys":[`) {
		t.Fatalf("JSON %s lacks the documented field names", gotJSON)
	}
	for input, wantErr := range map[string]string{
		"hookgate {\n handshake on\n}":           "handshake takes one argument: off",
		"hookgate {\n id body_sha256 extra x\n}": "id takes: header|json <name|path>, or body_sha256",
		"hookgate {\n id json\n}":                "id takes: header|json <name|path>, or body_sha256",
		"hookgate {\n public_key\n}":             "wrong argument count",
		"hookgate {\n public_url a b\n}":         "wrong argument count",
	} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: got error %v, want one containing %q", input, err, wantErr)
		}
	}
}

// Zoom sends no event ID: the body's SHA-256 is the ID, so Zoom's retry (the same body, signed
// again with a fresh timestamp) is a duplicate, and the app sees the digest as Hookgate-Event-Id.
// A generic route can choose the same source.
func TestBodySHA256IDDedupesResentBody(t *testing.T) {
	body := `{"event":"meeting.started","event_ts":1654503849680,"payload":{"object":{"id":"85392788421"}}}`
	sum := sha256.Sum256([]byte(body))
	digest := hex.EncodeToString(sum[:])
	for name, extra := range map[string][]string{
		"zoom":    nil,
		"generic": {"signature_header X-Signature", "id body_sha256"},
	} {
		t.Run(name, func(t *testing.T) {
			up := hooktest.NewUpstream(t)
			route := "digest_" + name
			tester := caddytest.NewTester(t)
			tester.InitServer(presetGatewayConfig(name, route, up.Listener.Addr().String(), extra...), "caddyfile")
			url := "http://localhost:9080/hooks/" + route
			sign := func(body string) *signedRequest {
				if name == "generic" {
					req := signRequest(t, "github", hooktest.Secret, "", url, "application/json", body, nil)
					req.header.Set("X-Signature", strings.TrimPrefix(req.header.Get("X-Hub-Signature-256"), "sha256="))
					return req
				}
				return signRequest(t, name, hooktest.Secret, "", url, "application/json", body, nil)
			}
			hooktest.ExpectReply(t, "first delivery", sendSigned(t, tester.Client, sign(body), ""), http.StatusOK, "upstream says hi")
			hooktest.ExpectReply(t, "the provider's retry, signed again", sendSigned(t, tester.Client, sign(body), ""), http.StatusOK, `"duplicate":true`)
			hooktest.ExpectReply(t, "another event", sendSigned(t, tester.Client, sign(strings.Replace(body, "started", "ended", 1)), ""), http.StatusOK, "upstream says hi")
			if up.Count(digest) != 1 || up.Total() != 2 {
				t.Fatalf("the app saw the event %d times under its body digest (and %d events in all), want 1 (and 2)", up.Count(digest), up.Total())
			}
		})
	}
}

// expectProvisionRefused fails t unless h refuses to provision with an error containing wantErr
// and none of the secrets.
func expectProvisionRefused(t *testing.T, h Handler, wantErr string, secrets ...string) {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	err := h.Provision(ctx)
	if err == nil {
		h.Cleanup()
		t.Fatalf("provisioned, want error containing %q", wantErr)
	}
	for _, secret := range secrets {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q shows a secret", err)
		}
	}
	if !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("error %q, want one containing %q", err, wantErr)
	}
}
