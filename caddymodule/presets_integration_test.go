package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// The presets end to end: public URLs behind proxies, replays under unsigned or malleable IDs,
// handshakes in async mode, and Discord's webhook events.

// A trusted proxy that appends to X-Forwarded-Host (a comma-joined value, or a second header
// line) keeps whatever the client sent in front of its own value. The gateway reads the first
// value, so a client behind such a proxy chooses the host of the URL the signature is checked
// against, and a Twilio request signed for another endpoint of the same account verifies here.
func TestAppendedForwardedHostIsNotTheClients(t *testing.T) {
	up := hooktest.NewUpstream(t)
	route := "r11_xfh"
	path := "/hooks/" + route + "?src=lb"
	tester := caddytest.NewTester(t)
	tester.InitServer(withTrustedProxies(presetGatewayConfig("twilio", route, up.Listener.Addr().String())), "caddyfile")
	step := 0
	form := func() string {
		step++
		return fmt.Sprintf("CallSid=CAxfh%d&From=%%2B14158675309&To=%%2B14155551212", step)
	}
	local := strings.Replace(publicOrigin+path, publicOrigin, "http://localhost:9080", 1)

	// The proxy replaces the header: its one value is the public host, which verifies.
	genuine := signRequest(t, "twilio", hooktest.Secret, "r11-xfh-1", publicOrigin+path, "application/x-www-form-urlencoded", form(), nil)
	genuine.header.Set("X-Forwarded-Proto", "https")
	genuine.header.Set("X-Forwarded-Host", "hooks.example.com")
	hooktest.ExpectReply(t, "a replacing proxy, signed for the public URL", sendSigned(t, tester.Client, genuine, local), http.StatusOK, "upstream says hi")

	for name, hosts := range map[string][]string{
		"comma-appended":     {"other.example.com, hooks.example.com"},
		"second header line": {"other.example.com", "hooks.example.com"},
	} {
		t.Run(name, func(t *testing.T) {
			// Signed by the provider for another endpoint; the client sends it through the proxy.
			other := signRequest(t, "twilio", hooktest.Secret, "r11-xfh-"+name, "https://other.example.com"+path, "application/x-www-form-urlencoded", form(), nil)
			other.header.Set("X-Forwarded-Proto", "https")
			other.header["X-Forwarded-Host"] = hosts
			got := sendSigned(t, tester.Client, other, local)
			if got.Status != http.StatusUnauthorized {
				t.Fatalf("a request signed for https://other.example.com, X-Forwarded-Host %q (the client's value, then the proxy's): got %d %q, want 401",
					hosts, got.Status, got.Body)
			}
		})
	}
}

// The signature of Twilio's form webhooks covers the sorted parameters, not the body's bytes:
// the same parameters in another order, or with an empty pair, carry the same signature. An
// `id body_sha256` route takes the raw body's digest as the ID, so such a replay is a new event.
// (The preset's own ID, an unsigned header, is claimed with the digest of the signed bytes, which
// catches it: the "default id" case holds.)
func TestTwilioFormReplayWithSameParamsIsDuplicate(t *testing.T) {
	for name, extra := range map[string][]string{
		"default id":     nil,
		"id body_sha256": {"id body_sha256"},
	} {
		t.Run(name, func(t *testing.T) {
			up := hooktest.NewUpstream(t)
			route := "r11_twbody_" + strings.ReplaceAll(name, " ", "_")
			tester := caddytest.NewTester(t)
			tester.InitServer(presetGatewayConfig("twilio", route, up.Listener.Addr().String(), extra...), "caddyfile")
			url := "http://localhost:9080/hooks/" + route
			body := "CallSid=CA" + route + "&From=%2B14158675309&To=%2B14155551212"
			first := signRequest(t, "twilio", hooktest.Secret, route+"-1", url, "application/x-www-form-urlencoded", body, nil)
			hooktest.ExpectReply(t, "first delivery", sendSigned(t, tester.Client, first, ""), http.StatusOK, "upstream says hi")

			for _, replayed := range []string{
				"To=%2B14155551212&CallSid=CA" + route + "&From=%2B14158675309", // reordered
				body + "&",                             // an empty pair
				strings.Replace(body, "CA", "C%41", 1), // an escaped letter
			} {
				replay := &signedRequest{method: first.method, url: first.url, header: first.header.Clone(), body: replayed}
				replay.header.Set("I-Twilio-Idempotency-Token", route+"-fresh-"+replayed[:4])
				got := sendSigned(t, tester.Client, replay, "")
				if got.Status != http.StatusOK || !strings.Contains(got.Body, `"duplicate":true`) {
					t.Fatalf("the first request's signature over the body %q: got %d %q, want 200 duplicate (the app has seen %d requests)",
						replayed, got.Status, got.Body, up.Total())
				}
			}
		})
	}
}

// The unsigned ID headers the new presets read (Twilio, Box, Sanity, Linear, Razorpay) are
// claimed with the digest of the signed bytes: a captured request replayed under a fresh ID is a
// duplicate, in both modes.
func TestReplayUnderFreshUnsignedIDHeaderIsDuplicate(t *testing.T) {
	idHeaders := map[string]string{
		"twilio": "I-Twilio-Idempotency-Token", "box": "Box-Delivery-Id", "sanity": "Idempotency-Key",
		"linear": "Linear-Delivery", "razorpay": "X-Razorpay-Event-Id",
	}
	for preset, idHeader := range idHeaders {
		for _, mode := range []string{"sync", "async"} {
			t.Run(preset+"/"+mode, func(t *testing.T) {
				up := hooktest.NewUpstream(t)
				route := "r11_fresh_" + preset + "_" + mode
				upstreamAddr, extra := up.Listener.Addr().String(), []string(nil)
				wantStatus, wantBody := http.StatusOK, "upstream says hi"
				if mode == "async" {
					extra = []string{asyncRoute(upstreamAddr)}
					upstreamAddr, wantStatus, wantBody = unusedUpstream, http.StatusAccepted, `"received":true`
				}
				tester := caddytest.NewTester(t)
				tester.InitServer(presetGatewayConfig(preset, route, upstreamAddr, extra...), "caddyfile")
				url := "http://localhost:9080/hooks/" + route
				first := signRequest(t, preset, hooktest.Secret, route+"-1", url, "application/json", fmt.Sprintf(`{"route":%q,"n":1,"webhookTimestamp":%d}`, route, time.Now().UnixMilli()), nil)
				if first.header.Get(idHeader) == "" {
					first.header.Set(idHeader, route+"-1")
				}
				hooktest.ExpectReply(t, "first delivery", sendSigned(t, tester.Client, first, ""), wantStatus, wantBody)
				replay := &signedRequest{method: first.method, url: first.url, header: first.header.Clone(), body: first.body}
				replay.header.Set(idHeader, route+"-2")
				hooktest.ExpectReply(t, "the same signed bytes under a fresh ID", sendSigned(t, tester.Client, replay, ""), http.StatusOK, `"duplicate":true`)
				if mode == "async" {
					hooktest.WaitFor(t, "the first delivery", 10*time.Second, func() bool { return up.Total() >= 1 })
					time.Sleep(200 * time.Millisecond)
				}
				if n := up.Total(); n != 1 {
					t.Fatalf("the app got %d requests, want 1", n)
				}
			})
		}
	}
}

// In async mode a handshake is answered at once, never queued nor recorded: the forward target
// gets only the genuine event that follows it, under the same ID where the check has one. LINE's
// empty batch is covered too (the sync handshake table has no LINE case).
func TestAsyncHandshakesAreNeverQueued(t *testing.T) {
	cases := map[string]handshakeCase{}
	for name, tc := range handshakeCases {
		cases[name] = tc
	}
	cases["line"] = handshakeCase{
		preset: "line", key: hooktest.Secret,
		check: func(string) (string, http.Header) {
			return `{"destination":"U1234567890abcdef1234567890abcdef","events":[]}`, nil
		},
		status: 200, contentType: "application/json", answer: `{}`,
		event: `{"destination":"U1234567890abcdef1234567890abcdef","events":[{"type":"message","webhookEventId":"%s","mode":"active"}]}`,
	}
	for _, mode := range []string{"sync", "async"} {
		for name, tc := range cases {
			if mode == "sync" && name != "line" {
				continue // handshake_test.go covers the others in sync mode
			}
			t.Run(mode+"/"+name, func(t *testing.T) {
				up := hooktest.NewUpstream(t)
				route := "r11_hs_" + mode + "_" + strings.ReplaceAll(name, " ", "_")
				upstreamAddr, extra := up.Listener.Addr().String(), []string(nil)
				wantStatus := http.StatusOK
				if mode == "async" {
					extra = []string{asyncRoute(upstreamAddr)}
					upstreamAddr, wantStatus = unusedUpstream, http.StatusAccepted
				}
				tester := caddytest.NewTester(t)
				tester.InitServer(handshakeConfig(tc.preset, route, upstreamAddr, extra...), "caddyfile")
				url := "http://localhost:9080/hooks/" + route
				checkID := route + "_1"
				body, hdr := tc.check(checkID)
				got := sendSigned(t, tester.Client, signRequest(t, tc.preset, tc.key, checkID, url, "application/json", body, hdr), "")
				if got.Status != tc.status || got.Body != tc.answer || got.Header.Get("Hookgate-Outcome") != "handshake" {
					t.Fatalf("handshake: got %d %q (outcome %q), want %d %q (handshake)", got.Status, got.Body, got.Header.Get("Hookgate-Outcome"), tc.status, tc.answer)
				}
				want := 0
				if tc.event != "" {
					event := strings.ReplaceAll(tc.event, "%s", checkID)
					genuine := signRequest(t, tc.preset, tc.key, checkID, url, "application/json", event, nil)
					got := sendSigned(t, tester.Client, genuine, "")
					if got.Status != wantStatus {
						t.Fatalf("the genuine event after the check: got %d %q, want %d", got.Status, got.Body, wantStatus)
					}
					want = 1
					hooktest.WaitFor(t, "the genuine event", 10*time.Second, func() bool { return up.Total() >= 1 })
				}
				time.Sleep(300 * time.Millisecond) // anything queued by mistake would be delivered by now
				if n := up.Total(); n != want {
					t.Fatalf("the app got %d requests (bodies %q), want %d: the genuine event only", n, up.Bodies, want)
				}
			})
		}
	}
}

// Discord's webhook events ({"version":1,"application_id":…,"type":1,"event":{…}}) carry no
// top-level "id", the discord preset's event ID: every real webhook event is refused with 400,
// though its PING (type 0) is answered 204. Discord retries, then disables the endpoint.
func TestDiscordWebhookEventIsAccepted(t *testing.T) {
	up := hooktest.NewUpstream(t)
	route := "r11_discord_events"
	tester := caddytest.NewTester(t)
	tester.InitServer(handshakeConfig("discord", route, up.Listener.Addr().String()), "caddyfile")
	url := "http://localhost:9080/hooks/" + route
	key := handshakeCases["discord PING"].key
	ping := signRequest(t, "discord", key, "", url, "application/json", `{"version":1,"application_id":"11779","type":0}`, nil)
	hooktest.ExpectReply(t, "the webhook-event PING", sendSigned(t, tester.Client, ping, ""), http.StatusNoContent, "")
	event := signRequest(t, "discord", key, "", url, "application/json",
		`{"version":1,"application_id":"11779","type":1,"event":{"type":"APPLICATION_AUTHORIZED","timestamp":"2024-10-18T14:42:53.064834","data":{"integration_type":0,"scopes":["applications.commands"],"user":{"id":"42"}}}}`, nil)
	got := sendSigned(t, tester.Client, event, "")
	if got.Status != http.StatusOK || up.Total() != 1 {
		t.Fatalf("a signed Discord webhook event: got %d %q, the app got %d requests; want it handed on", got.Status, got.Body, up.Total())
	}
}
