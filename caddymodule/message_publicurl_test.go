package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

const publicOrigin = "https://hooks.example.com"

// urlSignedCase is a provider that signs the URL it called, and a fresh event of it per step.
type urlSignedCase struct {
	preset, contentType string
	event               func(n int) (id, body string)
}

var urlSignedCases = map[string]urlSignedCase{
	"twilio form": {"twilio", "application/x-www-form-urlencoded", func(n int) (string, string) {
		return fmt.Sprintf("twilio-form-%d", n), fmt.Sprintf("CallSid=CA%d&From=%%2B14158675309&To=%%2B14155551212", n)
	}},
	"twilio json": {"twilio", "application/json", func(n int) (string, string) {
		return fmt.Sprintf("twilio-json-%d", n), fmt.Sprintf(`{"CallSid":"CA%d","CallStatus":"ringing"}`, n)
	}},
	"square": {"square", "application/json", func(n int) (string, string) {
		return "", fmt.Sprintf(`{"merchant_id":"6SSW7HV8K2ST5","type":"payment.created","event_id":"sq-%d"}`, n)
	}},
	"hubspot": {"hubspot", "application/json", func(n int) (string, string) {
		return "", fmt.Sprintf(`[{"eventId":%d,"subscriptionType":"contact.creation","objectId":123}]`, 1000+n)
	}},
}

// withTrustedProxies lets the server trust X-Forwarded-* headers from 127.0.0.1, and names the
// public host the proxy forwards among the site's addresses, as a URL-signing route must.
func withTrustedProxies(cfg string) string {
	cfg = strings.Replace(cfg, "http://localhost:9080 {", "http://localhost:9080, http://hooks.example.com:9080 {", 1)
	return strings.Replace(cfg, "grace_period 5s\n", "grace_period 5s\n\tservers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}\n", 1)
}

// Twilio, Square and HubSpot sign the URL they called. Called directly, the default (the request's
// own URL) verifies; behind a load balancer the URL Caddy sees differs, so a request signed for the
// public URL is refused until public_url names it, or until the server trusts the proxy whose
// X-Forwarded-Proto and X-Forwarded-Host say it (and only then: an untrusted client's are ignored).
func TestPublicURLForSchemesThatSignTheURL(t *testing.T) {
	for name, tc := range urlSignedCases {
		t.Run(name, func(t *testing.T) {
			up := hooktest.NewUpstream(t)
			route := "url_" + strings.ReplaceAll(name, " ", "_")
			path := "/hooks/" + route + "?src=lb"
			local := "http://localhost:9080" + path
			step := 0
			signed := func(rawURL string) *signedRequest {
				step++
				id, body := tc.event(step)
				return signRequest(t, tc.preset, hooktest.Secret, id, rawURL, tc.contentType, body, nil)
			}
			// behindLB sends a request signed for the public URL to Caddy's own address.
			behindLB := func(tester *caddytest.Tester, forwarded bool) hooktest.Reply {
				req := signed(publicOrigin + path)
				if forwarded {
					req.header.Set("X-Forwarded-Proto", "https")
					req.header.Set("X-Forwarded-Host", "hooks.example.com")
				}
				return sendSigned(t, tester.Client, req, strings.Replace(req.url, publicOrigin, "http://localhost:9080", 1))
			}
			tester := caddytest.NewTester(t)
			cfg := presetGatewayConfig(tc.preset, route, up.Listener.Addr().String())
			tester.InitServer(cfg, "caddyfile")
			hooktest.ExpectReply(t, "signed for the URL called", sendSigned(t, tester.Client, signed(local), ""), http.StatusOK, "upstream says hi")
			hooktest.ExpectReply(t, "signed for the public URL, default", behindLB(tester, false), http.StatusUnauthorized, "signature")
			hooktest.ExpectReply(t, "forwarded headers from an untrusted client", behindLB(tester, true), http.StatusUnauthorized, "signature")

			tester.InitServer(presetGatewayConfig(tc.preset, route, up.Listener.Addr().String(), "public_url "+publicOrigin), "caddyfile")
			hooktest.ExpectReply(t, "signed for the public URL, public_url set", behindLB(tester, false), http.StatusOK, "upstream says hi")

			tester.InitServer(withTrustedProxies(cfg), "caddyfile")
			hooktest.ExpectReply(t, "forwarded headers from a trusted proxy", behindLB(tester, true), http.StatusOK, "upstream says hi")
			hooktest.ExpectReply(t, "a trusted proxy that forwards nothing", behindLB(tester, false), http.StatusUnauthorized, "signature")
			if n := up.Total(); n != 3 {
				t.Fatalf("the app got %d events, want the 3 accepted", n)
			}
		})
	}
}

// public_url may hold placeholders, expanded per request; with a path, it is the whole URL.
func TestPublicURLPlaceholdersAndPath(t *testing.T) {
	t.Setenv("HOOKGATE_TEST_PUBLIC_HOST", "hooks.example.com")
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	public := publicOrigin + "/square/notifications"
	tester.InitServer(presetGatewayConfig("square", "url_placeholder", up.Listener.Addr().String(),
		"public_url https://{env.HOOKGATE_TEST_PUBLIC_HOST}/square/notifications"), "caddyfile")
	req := signRequest(t, "square", hooktest.Secret, "", public, "application/json", `{"type":"payment.created","event_id":"sq-ph-1"}`, nil)
	hooktest.ExpectReply(t, "signed for public_url's whole URL", sendSigned(t, tester.Client, req, gateURL), http.StatusOK, "upstream says hi")
	req = signRequest(t, "square", hooktest.Secret, "", publicOrigin+"/hooks/test", "application/json", `{"type":"payment.created","event_id":"sq-ph-2"}`, nil)
	hooktest.ExpectReply(t, "signed for the path Caddy sees", sendSigned(t, tester.Client, req, gateURL), http.StatusUnauthorized, "signature")
}

// A reload that changes the public key or the public URL takes effect at once: what the old key
// or URL verified is refused, what the new one names goes through.
func TestReloadChangesKeyAndPublicURL(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)

	oldKey, newKey := hooktest.Ed25519Pair("hookgate-reloaded-discord-old-k!"), hooktest.Ed25519Pair("hookgate-reloaded-discord-new-k!")
	discord := func(key hooktest.KeyPair) string {
		cfg := presetGatewayConfig("discord", "r11_reload_discord", up.Listener.Addr().String(), "public_key "+key.Public)
		return strings.Replace(cfg, "secret  {env.HOOKGATE_TEST_SECRET}", "", 1)
	}
	event := func(key hooktest.KeyPair, n int) *signedRequest {
		return signRequest(t, "discord", key.Private, "", gateURL, "application/json", fmt.Sprintf(`{"id":"r11_reload_%d","type":2}`, n), nil)
	}
	tester.InitServer(discord(oldKey), "caddyfile")
	hooktest.ExpectReply(t, "old key before the reload", sendSigned(t, tester.Client, event(oldKey, 1), ""), http.StatusOK, "upstream says hi")
	tester.InitServer(discord(newKey), "caddyfile")
	hooktest.ExpectReply(t, "old key after the reload", sendSigned(t, tester.Client, event(oldKey, 2), ""), http.StatusUnauthorized, "signature")
	hooktest.ExpectReply(t, "new key after the reload", sendSigned(t, tester.Client, event(newKey, 3), ""), http.StatusOK, "upstream says hi")

	square := func(public string) string {
		return presetGatewayConfig("square", "r11_reload_square", up.Listener.Addr().String(), "public_url "+public)
	}
	signed := func(origin string, n int) *signedRequest {
		return signRequest(t, "square", hooktest.Secret, "", origin+"/hooks/test", "application/json", fmt.Sprintf(`{"type":"payment.created","event_id":"r11-sq-%d"}`, n), nil)
	}
	tester.InitServer(square("https://a.example.com"), "caddyfile")
	hooktest.ExpectReply(t, "public_url a, signed for a", sendSigned(t, tester.Client, signed("https://a.example.com", 1), gateURL), http.StatusOK, "upstream says hi")
	tester.InitServer(square("https://b.example.com"), "caddyfile")
	hooktest.ExpectReply(t, "public_url b, signed for a", sendSigned(t, tester.Client, signed("https://a.example.com", 2), gateURL), http.StatusUnauthorized, "signature")
	hooktest.ExpectReply(t, "public_url b, signed for b", sendSigned(t, tester.Client, signed("https://b.example.com", 3), gateURL), http.StatusOK, "upstream says hi")
}

// An earlier handler that rewrites the path (handle_path, rewrite) does not change the URL the
// signature is checked against: the provider signed the URL it called.
func TestRewrittenRequestVerifiesAgainstOriginalURL(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := caddytest.NewTester(t)
	tester.InitServer(fmt.Sprintf(testSite+`	handle_path /hooks/* {
		rewrite * /inner{uri}
		hookgate {
			preset  twilio
			secret  {env.HOOKGATE_TEST_SECRET}
			name    r11_rewrite
			storage badger %s
		}
		reverse_proxy %s
	}
}
`, storageDir, up.Listener.Addr().String()), "caddyfile")
	called := "http://localhost:9080/hooks/r11?x=1"
	form := func(n int) string { return fmt.Sprintf("CallSid=CAr11rw%d&From=%%2B14158675309", n) }
	original := signRequest(t, "twilio", hooktest.Secret, "r11-rw-1", called, "application/x-www-form-urlencoded", form(1), nil)
	hooktest.ExpectReply(t, "signed for the URL called", sendSigned(t, tester.Client, original, ""), http.StatusOK, "upstream says hi")
	rewritten := signRequest(t, "twilio", hooktest.Secret, "r11-rw-2", "http://localhost:9080/inner/r11?x=1", "application/x-www-form-urlencoded", form(2), nil)
	hooktest.ExpectReply(t, "signed for the rewritten URL", sendSigned(t, tester.Client, rewritten, called), http.StatusUnauthorized, "signature")
}

// Every new subdirective survives `caddy adapt`: the JSON it produces names each field as the
// module's JSON docs say, and that JSON loads and verifies.
func TestAdaptRoundTripOfURLAndKeySubdirectives(t *testing.T) {
	whpk := "whpk_" + strings.Repeat("A", 43) + "="
	caddyfile := fmt.Sprintf(testSite+`	hookgate /hooks/twilio {
		preset     twilio
		secret     {env.HOOKGATE_TEST_SECRET}
		name       r11_adapt_twilio
		storage    badger %[1]s
		public_url https://hooks.example.com
		id         body_sha256
	}
	hookgate /hooks/slack {
		preset    slack
		secret    {env.HOOKGATE_TEST_SECRET}
		name      r11_adapt_slack
		storage   badger %[1]s
		handshake off
	}
	hookgate /hooks/standard {
		preset     standard
		secret     {env.HOOKGATE_TEST_SECRET}
		public_key %[2]s
		name       r11_adapt_standard
		storage    badger %[1]s
	}
	hookgate /hooks/eleven {
		preset           generic
		secret           {env.HOOKGATE_TEST_SECRET}
		name             r11_adapt_eleven
		storage          badger %[1]s
		signature_header "X-Sig-A, X-Sig-B"
		signature_format stripe
		signature_key    v0
		signed           "{timestamp}.{body}"
		id               body_sha256
	}
	respond "ok"
}
`, storageDir, whpk)
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"public_url":"https://hooks.example.com"`,
		`"id":{"from":"body_sha256"}`,
		`"handshake_off":true`,
		`"public_keys":["` + whpk + `"]`,
		`"signature_header":"X-Sig-A, X-Sig-B"`,
		`"signature_key":"v0"`,
	} {
		if !strings.Contains(string(adapted), want) {
			t.Errorf("adapted JSON lacks %s:\n%s", want, adapted)
		}
	}
	var roundTrip map[string]any
	if err := json.Unmarshal(adapted, &roundTrip); err != nil {
		t.Fatal(err)
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(string(adapted), "json")
	req := signRequest(t, "twilio", hooktest.Secret, "r11-adapt-1", "https://hooks.example.com/hooks/twilio", "application/x-www-form-urlencoded", "CallSid=CAr11adapt", nil)
	hooktest.ExpectReply(t, "twilio through the adapted JSON", sendSigned(t, tester.Client, req, "http://localhost:9080/hooks/twilio"), http.StatusOK, "ok")
	slack := signRequest(t, "slack", hooktest.Secret, "", "http://localhost:9080/hooks/slack", "application/json", `{"type":"url_verification","challenge":"c"}`, nil)
	hooktest.ExpectReply(t, "slack handshake off through the adapted JSON", sendSigned(t, tester.Client, slack, ""), http.StatusBadRequest, "event_id")
}
