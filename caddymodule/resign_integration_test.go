package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// appWindow is the freshness window of the legacy apps below: short, so a test outage outlasts
// it, but over 1 s, since a timestamp in whole seconds (stripe's) is up to 1 s old when made.
const appWindow = 2 * time.Second

// checkingApp is a legacy app behind the gateway that checks every request's signature itself,
// with its own window, and answers 401 when the check fails, as the task-callback app does.
type checkingApp struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	failures []string
	headers  []http.Header
}

// startCheckingApp starts, on addr ("" for any port), an app that checks requests with scheme
// preset (tolerance appWindow) and secret, as the provider's own library would.
func startCheckingApp(t *testing.T, addr, preset, secret string) *checkingApp {
	t.Helper()
	cfg, _ := verify.Preset(preset)
	return startCheckingAppOf(t, addr, cfg, secret)
}

// startCheckingAppOf is startCheckingApp with the scheme cfg.
func startCheckingAppOf(t *testing.T, addr string, cfg verify.Config, secret string) *checkingApp {
	t.Helper()
	cfg.Tolerance = appWindow
	v, err := verify.New(cfg, []string{secret})
	if err != nil {
		t.Fatal(err)
	}
	app := &checkingApp{}
	app.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, err := v.Verify(r.Header, body, time.Now())
		app.mu.Lock()
		defer app.mu.Unlock()
		app.headers = append(app.headers, r.Header.Clone())
		if err != nil {
			app.statuses, app.failures = append(app.statuses, http.StatusUnauthorized), append(app.failures, err.Error())
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		app.statuses = append(app.statuses, http.StatusOK)
	}))
	if addr != "" {
		app.Listener.Close()
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		app.Listener = l
	}
	app.Start()
	t.Cleanup(app.Close)
	return app
}

func (a *checkingApp) answered() ([]int, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]int(nil), a.statuses...), append([]string(nil), a.failures...)
}

// eventState waits until the admin API shows the route's event in a final state and returns it.
func eventState(t *testing.T, route, id string) string {
	t.Helper()
	var shown string
	hooktest.WaitFor(t, id+" delivered or dead", 15*time.Second, func() bool {
		_, shown = admin(t, http.MethodGet, "/hookgate/events/"+route+"/"+id)
		return strings.Contains(shown, `"state":"delivered"`) || strings.Contains(shown, `"state":"dead"`)
	})
	return shown
}

// The story with a 2 s window: an event queued while the app is down, the app back
// after its window has passed. Without resign the app refuses the provider's original signature
// (401) and the event is a dead letter; with resign each attempt carries a fresh one and the
// app's own check passes.
func TestResignDeliversEventsDelayedPastTheAppsWindow(t *testing.T) {
	for _, resign := range []bool{false, true} {
		t.Run(fmt.Sprintf("resign=%v", resign), func(t *testing.T) {
			route := fmt.Sprintf("resign_window_%v", resign)
			addr := fmt.Sprintf("127.0.0.1:%d", hooktest.FreePort(t))
			extra := []string{"max_attempts 1000"}
			if resign {
				extra = append(extra, "resign")
			}
			tester := caddytest.NewTester(t)
			tester.InitServer(presetGatewayConfig("stripe", route, unusedUpstream, asyncRoute(addr, extra...)), "caddyfile")

			id := "evt_" + route
			hooktest.ExpectReply(t, "accepted while the app is down", send(t, tester.Client, presetEvent(t, "stripe", id, `{"id":"`+id+`","type":"test"}`)),
				http.StatusAccepted, "")
			time.Sleep(appWindow + 500*time.Millisecond) // the outage outlasts the app's window
			app := startCheckingApp(t, addr, "stripe", hooktest.Secret)

			shown := eventState(t, route, id)
			statuses, failures := app.answered()
			if !resign {
				if !strings.Contains(shown, `"state":"dead"`) || !strings.Contains(shown, `"last_status":401`) || len(statuses) != 1 {
					t.Fatalf("without resign: %s; app answered %v %q; want a dead letter after one 401", shown, statuses, failures)
				}
				return
			}
			if !strings.Contains(shown, `"state":"delivered"`) || len(statuses) != 1 || statuses[0] != http.StatusOK {
				t.Fatalf("with resign: %s; app answered %v %q; want delivered, the app's check passing", shown, statuses, failures)
			}
		})
	}
}

// eventAttempts is how many attempts of the route's event the admin API shows recorded.
func eventAttempts(t *testing.T, route, id string) int {
	t.Helper()
	_, shown := admin(t, http.MethodGet, "/hookgate/events/"+route+"/"+id)
	var ev struct{ Attempts int }
	if err := json.Unmarshal([]byte(shown), &ev); err != nil {
		t.Fatalf("admin API event %s: %v: %s", id, err, shown)
	}
	return ev.Attempts
}

// resign signs with the route's first secret as it is now: after a reload that puts a new
// secret first, an event queued before the reload reaches the app signed with the new one.
func TestResignUsesTheFirstSecretAfterReload(t *testing.T) {
	const newSecret = "whsec_bmV3LXJlc2lnbi1zZWNyZXQtZm9yLXRoZS1hcHA="
	route := "resign_reload"
	addr := fmt.Sprintf("127.0.0.1:%d", hooktest.FreePort(t))
	config := func(secrets ...string) string {
		cfg := presetGatewayConfig("stripe", route, unusedUpstream, asyncRoute(addr, "max_attempts 1000", "resign"))
		return strings.Replace(cfg, "secret  {env.HOOKGATE_TEST_SECRET}", "secret  "+strings.Join(secrets, "\n\t\tsecret  "), 1)
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(config(hooktest.Secret), "caddyfile")
	id := "evt_resign_reload"
	hooktest.ExpectReply(t, "accepted while the app is down", send(t, tester.Client, presetEvent(t, "stripe", id, `{"id":"`+id+`"}`)), http.StatusAccepted, "")

	tester.InitServer(config(newSecret, hooktest.Secret), "caddyfile") // the new secret first, the old beside it
	// An attempt in flight during the reload finishes with the settings it started with (signed
	// with the old secret): the app comes back once the next attempt has failed, so the ones it
	// sees all started after the reload. Attempts of one event never overlap.
	before := eventAttempts(t, route, id)
	hooktest.WaitFor(t, "an attempt recorded after the reload", 15*time.Second, func() bool { return eventAttempts(t, route, id) > before })
	app := startCheckingApp(t, addr, "stripe", newSecret)
	shown := eventState(t, route, id)
	if statuses, failures := app.answered(); !strings.Contains(shown, `"state":"delivered"`) || len(statuses) != 1 || statuses[0] != http.StatusOK {
		t.Fatalf("%s; app answered %v %q; want delivered, signed with the new first secret", shown, statuses, failures)
	}
}

// sign_upstream adds the gateway's Standard Webhooks signature, which an app checks with the
// standard preset and sign_upstream's secret: on the request handed to reverse_proxy (sync)
// and on a delivery attempt after the app's window (async, a fresh timestamp per attempt).
func TestSignUpstreamIsCheckedByTheApp(t *testing.T) {
	const gatewaySecret = "whsec_Z2F0ZXdheS1zaWduYXR1cmUtc2VjcmV0LWZvci10ZXN0cw=="
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			route := "sign_upstream_" + mode
			id := "evt_" + route
			tester := caddytest.NewTester(t)
			if mode == "sync" {
				app := startCheckingApp(t, "", "standard", gatewaySecret)
				tester.InitServer(presetGatewayConfig("stripe", route, app.Listener.Addr().String(), "sign_upstream "+gatewaySecret), "caddyfile")
				got := send(t, tester.Client, presetEvent(t, "stripe", id, `{"id":"`+id+`"}`))
				statuses, failures := app.answered()
				if got.Status != http.StatusOK || len(statuses) != 1 || statuses[0] != http.StatusOK {
					t.Fatalf("gateway answered %d %q; app answered %v %q; want the app's check to pass", got.Status, got.Body, statuses, failures)
				}
				if h := app.headers[0]; h.Get("Webhook-Id") != id || h.Get("Stripe-Signature") == "" {
					t.Fatalf("app got webhook-id %q and Stripe-Signature %q; want the event ID and the provider's header kept", h.Get("Webhook-Id"), h.Get("Stripe-Signature"))
				}
				return
			}
			addr := fmt.Sprintf("127.0.0.1:%d", hooktest.FreePort(t))
			tester.InitServer(presetGatewayConfig("stripe", route, unusedUpstream, "sign_upstream "+gatewaySecret, asyncRoute(addr, "max_attempts 1000")), "caddyfile")
			hooktest.ExpectReply(t, "accepted while the app is down", send(t, tester.Client, presetEvent(t, "stripe", id, `{"id":"`+id+`"}`)), http.StatusAccepted, "")
			time.Sleep(appWindow + 500*time.Millisecond)
			app := startCheckingApp(t, addr, "standard", gatewaySecret)
			shown := eventState(t, route, id)
			if statuses, failures := app.answered(); !strings.Contains(shown, `"state":"delivered"`) || len(statuses) != 1 || statuses[0] != http.StatusOK {
				t.Fatalf("%s; app answered %v %q; want delivered, the gateway's signature fresh", shown, statuses, failures)
			}
			if got := app.headers[0].Get("Webhook-Id"); got != id {
				t.Fatalf("webhook-id %q, want the event ID %q", got, id)
			}
		})
	}
}

// sign_upstream in the app's own scheme: a GitHub event (signed over the body alone, no
// timestamp) reaches an app that checks the task service's scheme with its own secret and a
// window, signed that way when it is handed on (sync) or when it is finally delivered after an
// outage longer than the window (async); the provider's signature header is gone, its delivery
// ID kept.
func TestSignUpstreamInTheAppsSchemeIsCheckedByTheApp(t *testing.T) {
	const appSecret = "replace-this-secret"
	signUpstream := `sign_upstream {
			secret ` + appSecret + `
			signature_header X-Webhook-Signature
			prefix sha256=
			encoding hex
			signed {timestamp}.{body}
			timestamp_header X-Webhook-Timestamp
			timestamp_unit s
		}`
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			route := "app_scheme_" + mode
			id := "gh-" + route
			tester := caddytest.NewTester(t)
			ev := presetEvent(t, "github", id, `{"action":"opened","number":7}`)
			var app *checkingApp
			if mode == "sync" {
				app = startCheckingAppOf(t, "", hooktest.TaskServiceScheme, appSecret)
				tester.InitServer(presetGatewayConfig("github", route, app.Listener.Addr().String(), signUpstream), "caddyfile")
				hooktest.ExpectReply(t, "handed on", send(t, tester.Client, ev), http.StatusOK, "")
			} else {
				addr := fmt.Sprintf("127.0.0.1:%d", hooktest.FreePort(t))
				tester.InitServer(presetGatewayConfig("github", route, unusedUpstream, signUpstream, asyncRoute(addr, "max_attempts 1000")), "caddyfile")
				hooktest.ExpectReply(t, "accepted while the app is down", send(t, tester.Client, ev), http.StatusAccepted, "")
				time.Sleep(appWindow + 500*time.Millisecond) // the outage outlasts the app's window
				app = startCheckingAppOf(t, addr, hooktest.TaskServiceScheme, appSecret)
				if shown := eventState(t, route, id); !strings.Contains(shown, `"state":"delivered"`) {
					t.Fatalf("after the outage: %s, want delivered", shown)
				}
			}
			statuses, failures := app.answered()
			if len(statuses) != 1 || statuses[0] != http.StatusOK {
				t.Fatalf("the app answered %v %q; want its own check to pass once", statuses, failures)
			}
			if h := app.headers[0]; h.Get("X-Hub-Signature-256") != "" || h.Get("X-GitHub-Delivery") != id {
				t.Fatalf("the app got X-Hub-Signature-256 %q and X-GitHub-Delivery %q; want the provider's signature removed, its delivery ID kept",
					h.Get("X-Hub-Signature-256"), h.Get("X-GitHub-Delivery"))
			}
		})
	}
}

// The operator's order with hubspot, whose signature covers the URL it called: an outage, the
// app's window passes, resign is turned on by a reload, the app comes back. The event queued
// before the reload is re-signed over the URL the provider called (kept with it although resign
// was off), passes the app's own check, and the kept URL never reaches the app.
func TestResignTurnedOnByReloadResignsHubspotBacklog(t *testing.T) {
	const route = "resign_hubspot_reload"
	addr := fmt.Sprintf("127.0.0.1:%d", hooktest.FreePort(t))
	config := func(extra ...string) string {
		return presetGatewayConfig("hubspot", route, unusedUpstream, asyncRoute(addr, append([]string{"max_attempts 1000"}, extra...)...))
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(config(), "caddyfile")

	cfg, _ := verify.Preset("hubspot")
	body := `[{"eventId":4242,"subscriptionType":"contact.creation"}]`
	signed := &verify.Message{Header: http.Header{}, Body: []byte(body), Method: http.MethodPost, URL: gateURL}
	if err := verify.SignMessage(cfg, hooktest.Secret, "", time.Now(), signed); err != nil {
		t.Fatal(err)
	}
	hooktest.ExpectReply(t, "accepted while the app is down", send(t, tester.Client, &hooktest.Event{ID: "4242", Body: body, Headers: signed.Header}), http.StatusAccepted, "")
	time.Sleep(appWindow + 500*time.Millisecond) // the outage outlasts the app's window

	tester.InitServer(config("resign"), "caddyfile")
	cfg.Tolerance = appWindow
	check, err := verify.New(cfg, []string{hooktest.Secret})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var answers []string
	app := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := io.ReadAll(r.Body)
		// The app checks the URL it is published at, as it did before hookgate.
		_, err := check.VerifyMessage(&verify.Message{Header: r.Header, Body: got, Method: r.Method, URL: gateURL}, time.Now())
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Header.Get("Hookgate-Signed-Url") != "":
			answers = append(answers, "got Hookgate-Signed-Url "+r.Header.Get("Hookgate-Signed-Url"))
		case err != nil:
			answers = append(answers, "401 "+err.Error())
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		default:
			answers = append(answers, "200")
		}
	}))
	app.Listener.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	app.Listener = l
	app.Start()
	t.Cleanup(app.Close)

	shown := eventState(t, route, "4242")
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(shown, `"state":"delivered"`) || len(answers) != 1 || answers[0] != "200" {
		t.Fatalf("%s; app: %q; want delivered, re-signed over the URL the provider called", shown, answers)
	}
}
