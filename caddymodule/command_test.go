package caddymodule

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/caddymodule/hookgatecmd"
	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// printedRequest runs `caddy hookgate sign` with args and turns the curl command it prints back
// into the request curl would send.
func printedRequest(t *testing.T, args ...string) *http.Request {
	t.Helper()
	return printedRequestAt(t, time.Now(), args...)
}

// printedRequestAt is printedRequest with the request signed at the given time.
func printedRequestAt(t *testing.T, at time.Time, args ...string) *http.Request {
	t.Helper()
	var printed bytes.Buffer
	if err := hookgatecmd.RunAt(context.Background(), at, &printed, append([]string{"sign"}, args...)...); err != nil {
		t.Fatalf("hookgate sign %q: %v", args, err)
	}
	url, hdr, body := hooktest.ParseCurl(hooktest.CurlArgs(t, printed.String()))
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr
	return req
}

// signKeys are, per preset, the key the signer is given and the route's key line.
type signKey struct{ signer, route string }

func signKeys(t *testing.T) map[string]signKey {
	keys := map[string]signKey{}
	for _, preset := range verify.PresetNames() {
		keys[preset] = signKey{"sign-test-secret", "secret sign-test-secret"}
	}
	for _, preset := range []string{"standard", "svix", "resend", "clerk", "openai"} {
		keys[preset] = signKey{hooktest.Secret, "secret " + hooktest.Secret}
	}
	seed := bytes.Repeat([]byte{1}, ed25519.SeedSize)
	public := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	keys["discord"] = signKey{hex.EncodeToString(seed), "public_key " + hex.EncodeToString(public)}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	private, _ := x509.MarshalPKCS8PrivateKey(p256)
	spki, _ := x509.MarshalPKIXPublicKey(&p256.PublicKey)
	keys["sendgrid"] = signKey{base64.StdEncoding.EncodeToString(private), "public_key " + base64.StdEncoding.EncodeToString(spki)}
	return keys
}

// genericFlags describe the generic preset's scheme to the signer; genericRoute to the route.
var (
	genericFlags = []string{"--signature-header", "X-Webhook-Signature", "--prefix", "sha256=", "--signed", "{timestamp}.{body}",
		"--timestamp-header", "X-Webhook-Timestamp", "--id-header", "X-Webhook-Id"}
	genericRoute = []string{"signature_header X-Webhook-Signature", "prefix sha256=", `signed "{timestamp}.{body}"`,
		"timestamp_header X-Webhook-Timestamp", "id header X-Webhook-Id"}
)

// variants are routes that change a preset, each with the sign flags that match the change: a
// form body, a signature key, and public URLs other than the one the request reaches (a full URL,
// and one with no path, which takes the request's path and query, with Twilio's bodySHA256).
var variants = []struct {
	name, preset string
	route, flags []string
}{
	{"twilio-form", "twilio", nil, []string{"--form"}},
	{"stripe-v0", "stripe", []string{"signature_key v0"}, []string{"--signature-key", "v0"}},
	{"proxied-hubspot", "hubspot", []string{"public_url https://hooks.example.com/hubspot"}, []string{"--public-url", "https://hooks.example.com/hubspot"}},
	{"proxied-twilio", "twilio", []string{"public_url https://hooks.example.com"}, []string{"--public-url", "https://hooks.example.com"}},
	{"proxied-square", "square", []string{"public_url https://hooks.example.com/square?tenant=1"}, []string{"--public-url", "https://hooks.example.com/square?tenant=1"}},
}

// everyPresetConfig is a Caddyfile with a route per preset at /hooks/<preset>, in front of upstream.
func everyPresetConfig(keys map[string]signKey, upstream string) string {
	var routes strings.Builder
	for _, preset := range verify.PresetNames() {
		lines := []string{"preset " + preset, "name sign_" + preset, "storage badger " + storageDir, keys[preset].route}
		if preset == "generic" {
			lines = append(lines, genericRoute...)
		}
		fmt.Fprintf(&routes, "\thookgate /hooks/%s {\n\t\t%s\n\t}\n", preset, strings.Join(lines, "\n\t\t"))
	}
	for _, v := range variants {
		lines := append([]string{"preset " + v.preset, "name sign_" + strings.ReplaceAll(v.name, "-", "_"), "storage badger " + storageDir, keys[v.preset].route}, v.route...)
		fmt.Fprintf(&routes, "\thookgate /hooks/variant/%s {\n\t\t%s\n\t}\n", v.name, strings.Join(lines, "\n\t\t"))
	}
	return fmt.Sprintf(testSite+`%s	reverse_proxy %s
}
`, routes.String(), upstream)
}

// TestSignPrintsAcceptedCurlForEveryPreset sends the request `caddy hookgate sign --preset NAME`
// prints to a route with that preset: it gets through once, and with one byte of its body
// changed it is refused.
func TestSignPrintsAcceptedCurlForEveryPreset(t *testing.T) {
	keys := signKeys(t)
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	tester.InitServer(everyPresetConfig(keys, up.Listener.Addr().String()), "caddyfile")

	type signCase struct {
		name, preset, path string
		flags              []string
	}
	var cases []signCase
	for _, preset := range verify.PresetNames() {
		cases = append(cases, signCase{name: preset, preset: preset, path: "/hooks/" + preset})
	}
	for _, v := range variants {
		cases = append(cases, signCase{v.name, v.preset, "/hooks/variant/" + v.name, v.flags})
	}
	accepted := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "evt_sign_" + strings.ReplaceAll(c.name, "-", "_")
			args := append([]string{"--preset", c.preset, "--secret", keys[c.preset].signer, "--id", id,
				"--url", "http://localhost:9080" + c.path + "?a=1"}, c.flags...)
			if c.preset == "generic" {
				args = append(args, genericFlags...)
			}
			req := printedRequest(t, args...)
			body, _ := req.GetBody()
			raw := new(bytes.Buffer)
			_, _ = raw.ReadFrom(body)

			before := up.Total()
			got := hooktest.DoRequest(t, tester.Client, req)
			if got.Status < 200 || got.Status > 299 || up.Total() != before+1 {
				t.Fatalf("the printed request was not passed on: %d %q (url %s, headers %v)", got.Status, got.Body, req.URL, req.Header)
			}
			if cfg, _ := verify.Preset(c.preset); !cfg.IDBodyDigest && up.Count(id) != 1 {
				t.Fatalf("the app did not see event %s", id)
			}
			accepted++

			tampered := bytes.Clone(raw.Bytes())
			tampered[len(tampered)/2] ^= 1
			req2 := req.Clone(req.Context())
			req2.Body, req2.ContentLength = nil, int64(len(tampered))
			req2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tampered)), nil }
			hooktest.ExpectReply(t, "one byte changed", hooktest.DoRequest(t, tester.Client, req2), http.StatusUnauthorized, "")
		})
	}
	t.Logf("%d of %d printed requests accepted", accepted, len(cases))
}
