package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
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
			up := newUpstream(t)
			route := "url_" + strings.ReplaceAll(name, " ", "_")
			path := "/hooks/" + route + "?src=lb"
			local := "http://localhost:9080" + path
			step := 0
			signed := func(rawURL string) *signedRequest {
				step++
				id, body := tc.event(step)
				return signRequest(t, tc.preset, testSecret, id, rawURL, tc.contentType, body, nil)
			}
			// behindLB sends a request signed for the public URL to Caddy's own address.
			behindLB := func(tester *caddytest.Tester, forwarded bool) reply {
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
			expectReply(t, "signed for the URL called", sendSigned(t, tester.Client, signed(local), ""), http.StatusOK, "upstream says hi")
			expectReply(t, "signed for the public URL, default", behindLB(tester, false), http.StatusUnauthorized, "signature")
			expectReply(t, "forwarded headers from an untrusted client", behindLB(tester, true), http.StatusUnauthorized, "signature")

			tester.InitServer(presetGatewayConfig(tc.preset, route, up.Listener.Addr().String(), "public_url "+publicOrigin), "caddyfile")
			expectReply(t, "signed for the public URL, public_url set", behindLB(tester, false), http.StatusOK, "upstream says hi")

			tester.InitServer(withTrustedProxies(cfg), "caddyfile")
			expectReply(t, "forwarded headers from a trusted proxy", behindLB(tester, true), http.StatusOK, "upstream says hi")
			expectReply(t, "a trusted proxy that forwards nothing", behindLB(tester, false), http.StatusUnauthorized, "signature")
			if n := up.total(); n != 3 {
				t.Fatalf("the app got %d events, want the 3 accepted", n)
			}
		})
	}
}

// public_url may hold placeholders, expanded per request; with a path, it is the whole URL.
func TestPublicURLPlaceholdersAndPath(t *testing.T) {
	t.Setenv("HOOKGATE_TEST_PUBLIC_HOST", "hooks.example.com")
	up := newUpstream(t)
	tester := caddytest.NewTester(t)
	public := publicOrigin + "/square/notifications"
	tester.InitServer(presetGatewayConfig("square", "url_placeholder", up.Listener.Addr().String(),
		"public_url https://{env.HOOKGATE_TEST_PUBLIC_HOST}/square/notifications"), "caddyfile")
	req := signRequest(t, "square", testSecret, "", public, "application/json", `{"type":"payment.created","event_id":"sq-ph-1"}`, nil)
	expectReply(t, "signed for public_url's whole URL", sendSigned(t, tester.Client, req, gateURL), http.StatusOK, "upstream says hi")
	req = signRequest(t, "square", testSecret, "", publicOrigin+"/hooks/test", "application/json", `{"type":"payment.created","event_id":"sq-ph-2"}`, nil)
	expectReply(t, "signed for the path Caddy sees", sendSigned(t, tester.Client, req, gateURL), http.StatusUnauthorized, "signature")
}
