package caddymodule

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// testDiscordKey is the test's Discord application key: the gateway gets its public half.
var testDiscordKey = ed25519.NewKeyFromSeed([]byte("hookgate-test-discord-key-seed!!"))

// signedRequest is a request as preset's provider would send it, signed with key (a secret or a
// private key) for the URL rawURL, which is also where it is sent unless sendTo is set.
type signedRequest struct {
	method, url, contentType string
	header                   http.Header
	body                     string
}

func signRequest(t *testing.T, preset, key, id, rawURL, contentType, body string, extra http.Header) *signedRequest {
	t.Helper()
	cfg, ok := verify.Preset(preset)
	if !ok {
		t.Fatalf("no preset %s", preset)
	}
	m := &verify.Message{Header: http.Header{"Content-Type": {contentType}}, Body: []byte(body), Method: http.MethodPost, URL: rawURL}
	for name, values := range extra {
		m.Header[name] = values
	}
	if err := verify.SignMessage(cfg, key, id, time.Now(), m); err != nil {
		t.Fatalf("signing for %s: %v", preset, err)
	}
	return &signedRequest{method: m.Method, url: m.URL, contentType: contentType, header: m.Header, body: body}
}

// sendSigned sends req to target (its own URL when ""), as send does: once the last config load
// has settled, trying again only a connection that could not be made.
func sendSigned(t *testing.T, client *http.Client, req *signedRequest, target string) hooktest.Reply {
	t.Helper()
	if target == "" {
		target = req.url
	}
	awaitLoadSettled(t, client)
	for tries := 1; ; tries++ {
		r, err := http.NewRequest(req.method, target, strings.NewReader(req.body))
		if err != nil {
			t.Fatal(err)
		}
		for name, values := range req.header {
			r.Header[name] = values
		}
		resp, err := client.Do(r)
		var dial *net.OpError
		if err != nil && errors.As(err, &dial) && dial.Op == "dial" && tries < 20 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("sending to %s: %v", target, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return hooktest.Reply{Status: resp.StatusCode, Body: string(body), Header: resp.Header}
	}
}

// handshakeCase is one provider's endpoint check and what the gateway must answer.
type handshakeCase struct {
	preset      string
	key         string // signs; the gateway verifies with hooktest.Secret or the Discord public key
	check       func(id string) (body string, extra http.Header)
	status      int
	contentType string
	answer      string
	event       string // a genuine event with the check's ID, or "" when the check has none
	whenOff     int    // the status of the check as an ordinary event, with handshake off
}

var twitchCheck = http.Header{"Twitch-Eventsub-Message-Type": {"webhook_callback_verification"}}

func zoomToken(plain string) string {
	mac := hmac.New(sha256.New, []byte(hooktest.Secret))
	mac.Write([]byte(plain))
	return hex.EncodeToString(mac.Sum(nil))
}

var handshakeCases = map[string]handshakeCase{
	"slack": {
		preset: "slack", key: hooktest.Secret,
		check: func(string) (string, http.Header) {
			return `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`, nil
		},
		status: 200, contentType: "application/json", answer: `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`,
		event: `{"type":"event_callback","event_id":"Ev_hs_slack","event":{"type":"app_mention"}}`, whenOff: http.StatusBadRequest,
	},
	"zoom": {
		preset: "zoom", key: hooktest.Secret,
		check: func(string) (string, http.Header) {
			return `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`, nil
		},
		status: 200, contentType: "application/json",
		answer: `{"encryptedToken":"` + zoomToken("qgg8vlvZRS6UYooatFL8Aw") + `","plainToken":"qgg8vlvZRS6UYooatFL8Aw"}`,
		event:  `{"event":"meeting.started","event_ts":1654503849681,"payload":{"object":{"id":"hs"}}}`, whenOff: http.StatusOK,
	},
	"discord PING": {
		preset: "discord", key: hex.EncodeToString(testDiscordKey.Seed()),
		check: func(id string) (string, http.Header) {
			return `{"id":"` + id + `","application_id":"11779","type":1,"version":1}`, nil
		},
		status: 200, contentType: "application/json", answer: `{"type":1}`,
		event: `{"id":"%s","application_id":"11779","type":2,"data":{"name":"hi"}}`, whenOff: http.StatusOK,
	},
	"discord webhook PING": {
		preset: "discord", key: hex.EncodeToString(testDiscordKey.Seed()),
		check: func(string) (string, http.Header) {
			return `{"version":1,"application_id":"11779","type":0}`, nil
		},
		status: http.StatusNoContent, whenOff: http.StatusOK, // its ID is the body's digest
	},
	"twitch": {
		preset: "twitch", key: hooktest.Secret,
		check: func(string) (string, http.Header) {
			return `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"type":"channel.follow"}}`, twitchCheck
		},
		status: 200, contentType: "text/plain; charset=utf-8", answer: "pogchamp-kappa-360noscope-vohiyo",
		event: `{"subscription":{"type":"channel.follow"},"event":{"user_id":"1337"}}`, whenOff: http.StatusOK,
	},
}

// handshakeConfig is a route for preset whose answers carry {http.hookgate.outcome}.
func handshakeConfig(preset, name, upstreamAddr string, extra ...string) string {
	cfg := presetGatewayConfig(preset, name, upstreamAddr, extra...)
	if preset == "discord" {
		cfg = strings.Replace(cfg, "secret  {env.HOOKGATE_TEST_SECRET}", "public_key "+hex.EncodeToString(testDiscordKey.Public().(ed25519.PublicKey)), 1)
	}
	return strings.Replace(cfg, "\treverse_proxy", "\theader >Hookgate-Outcome {http.hookgate.outcome}\n\treverse_proxy", 1)
}

// Each provider's endpoint check is answered by the gateway itself once verified: never handed to
// the app, never recorded (the genuine event with the check's ID goes through after it), never
// answered unverified; with `handshake off` it is an ordinary event.
func TestHandshakesAnsweredByTheGateway(t *testing.T) {
	for name, tc := range handshakeCases {
		t.Run(name, func(t *testing.T) {
			up := hooktest.NewUpstream(t)
			route := "hs_" + strings.ReplaceAll(name, " ", "_")
			tester := caddytest.NewTester(t)
			tester.InitServer(handshakeConfig(tc.preset, route, up.Listener.Addr().String()), "caddyfile")
			url := "http://localhost:9080/hooks/" + route
			checkID := route + "_1"
			body, extra := tc.check(checkID)

			got := sendSigned(t, tester.Client, signRequest(t, tc.preset, tc.key, checkID, url, "application/json", body, extra), "")
			if got.Status != tc.status || got.Body != tc.answer || got.Header.Get("Content-Type") != tc.contentType {
				t.Fatalf("handshake: got %d %q (Content-Type %q), want %d %q (%q)", got.Status, got.Body, got.Header.Get("Content-Type"), tc.status, tc.answer, tc.contentType)
			}
			if outcome := got.Header.Get("Hookgate-Outcome"); outcome != "handshake" {
				t.Fatalf("{http.hookgate.outcome} = %q, want handshake", outcome)
			}

			forged := signRequest(t, tc.preset, tc.key, checkID, url, "application/json", body, extra)
			forged.body += " "
			hooktest.ExpectReply(t, "a forged check", sendSigned(t, tester.Client, forged, ""), http.StatusUnauthorized, "signature")

			if tc.event != "" {
				event := strings.ReplaceAll(tc.event, "%s", checkID)
				genuine := signRequest(t, tc.preset, tc.key, checkID, url, "application/json", event, nil)
				hooktest.ExpectReply(t, "the genuine event after the check", sendSigned(t, tester.Client, genuine, ""), http.StatusOK, "upstream says hi")
			}
			want := 0
			if tc.event != "" {
				want = 1
			}
			if n := up.Total(); n != want {
				t.Fatalf("the app got %d requests, want %d (the genuine event only)", n, want)
			}

			tester.InitServer(handshakeConfig(tc.preset, route, up.Listener.Addr().String(), "handshake off"), "caddyfile")
			body, extra = tc.check(route + "_off")
			got = sendSigned(t, tester.Client, signRequest(t, tc.preset, tc.key, route+"_off", url, "application/json", body, extra), "")
			if got.Status != tc.whenOff || got.Header.Get("Hookgate-Outcome") == "handshake" {
				t.Fatalf("with handshake off: got %d %q, outcome %q; want %d as an ordinary event", got.Status, got.Body, got.Header.Get("Hookgate-Outcome"), tc.whenOff)
			}
		})
	}
}

// A route's `only` lines never leave out a provider's endpoint check: it is answered before them,
// even when no check could match them.
func TestHandshakesAnsweredBeforeOnlyFilters(t *testing.T) {
	for name, tc := range handshakeCases {
		t.Run(name, func(t *testing.T) {
			up := hooktest.NewUpstream(t)
			route := "hs_only_" + strings.ReplaceAll(name, " ", "_")
			tester := caddytest.NewTester(t)
			tester.InitServer(handshakeConfig(tc.preset, route, up.Listener.Addr().String(), "only json no_such_field x"), "caddyfile")
			url := "http://localhost:9080/hooks/" + route
			body, extra := tc.check(route + "_1")
			got := sendSigned(t, tester.Client, signRequest(t, tc.preset, tc.key, route+"_1", url, "application/json", body, extra), "")
			if got.Status != tc.status || got.Body != tc.answer || got.Header.Get("Hookgate-Outcome") != "handshake" {
				t.Fatalf("handshake under an only line: got %d %q (outcome %q), want %d %q (handshake)", got.Status, got.Body, got.Header.Get("Hookgate-Outcome"), tc.status, tc.answer)
			}
		})
	}
}
