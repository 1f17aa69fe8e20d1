package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
)

// A reload that changes the public key or the public URL takes effect at once: what the old key
// or URL verified is refused, what the new one names goes through.
func TestReloadChangesKeyAndPublicURL(t *testing.T) {
	up := newUpstream(t)
	tester := caddytest.NewTester(t)

	oldKey, newKey := ed25519Pair("hookgate-review11-discord-old-k!"), ed25519Pair("hookgate-review11-discord-new-k!")
	discord := func(key keyPair) string {
		cfg := presetGatewayConfig("discord", "r11_reload_discord", up.Listener.Addr().String(), "public_key "+key.public)
		return strings.Replace(cfg, "secret  {env.HOOKGATE_TEST_SECRET}", "", 1)
	}
	event := func(key keyPair, n int) *signedRequest {
		return signRequest(t, "discord", key.private, "", gateURL, "application/json", fmt.Sprintf(`{"id":"r11_reload_%d","type":2}`, n), nil)
	}
	tester.InitServer(discord(oldKey), "caddyfile")
	expectReply(t, "old key before the reload", sendSigned(t, tester.Client, event(oldKey, 1), ""), http.StatusOK, "upstream says hi")
	tester.InitServer(discord(newKey), "caddyfile")
	expectReply(t, "old key after the reload", sendSigned(t, tester.Client, event(oldKey, 2), ""), http.StatusUnauthorized, "signature")
	expectReply(t, "new key after the reload", sendSigned(t, tester.Client, event(newKey, 3), ""), http.StatusOK, "upstream says hi")

	square := func(public string) string {
		return presetGatewayConfig("square", "r11_reload_square", up.Listener.Addr().String(), "public_url "+public)
	}
	signed := func(origin string, n int) *signedRequest {
		return signRequest(t, "square", testSecret, "", origin+"/hooks/test", "application/json", fmt.Sprintf(`{"type":"payment.created","event_id":"r11-sq-%d"}`, n), nil)
	}
	tester.InitServer(square("https://a.example.com"), "caddyfile")
	expectReply(t, "public_url a, signed for a", sendSigned(t, tester.Client, signed("https://a.example.com", 1), gateURL), http.StatusOK, "upstream says hi")
	tester.InitServer(square("https://b.example.com"), "caddyfile")
	expectReply(t, "public_url b, signed for a", sendSigned(t, tester.Client, signed("https://a.example.com", 2), gateURL), http.StatusUnauthorized, "signature")
	expectReply(t, "public_url b, signed for b", sendSigned(t, tester.Client, signed("https://b.example.com", 3), gateURL), http.StatusOK, "upstream says hi")
}

// An earlier handler that rewrites the path (handle_path, rewrite) does not change the URL the
// signature is checked against: the provider signed the URL it called.
func TestRewrittenRequestVerifiesAgainstOriginalURL(t *testing.T) {
	up := newUpstream(t)
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
	original := signRequest(t, "twilio", testSecret, "r11-rw-1", called, "application/x-www-form-urlencoded", form(1), nil)
	expectReply(t, "signed for the URL called", sendSigned(t, tester.Client, original, ""), http.StatusOK, "upstream says hi")
	rewritten := signRequest(t, "twilio", testSecret, "r11-rw-2", "http://localhost:9080/inner/r11?x=1", "application/x-www-form-urlencoded", form(2), nil)
	expectReply(t, "signed for the rewritten URL", sendSigned(t, tester.Client, rewritten, called), http.StatusUnauthorized, "signature")
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
	req := signRequest(t, "twilio", testSecret, "r11-adapt-1", "https://hooks.example.com/hooks/twilio", "application/x-www-form-urlencoded", "CallSid=CAr11adapt", nil)
	expectReply(t, "twilio through the adapted JSON", sendSigned(t, tester.Client, req, "http://localhost:9080/hooks/twilio"), http.StatusOK, "ok")
	slack := signRequest(t, "slack", testSecret, "", "http://localhost:9080/hooks/slack", "application/json", `{"type":"url_verification","challenge":"c"}`, nil)
	expectReply(t, "slack handshake off through the adapted JSON", sendSigned(t, tester.Client, slack, ""), http.StatusBadRequest, "event_id")
}
