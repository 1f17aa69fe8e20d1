//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// The resign proof (issue 13), with the built binary. Legacy apps that check the provider's
// signature themselves, with the provider's 5-minute window, sit behind async routes. An event
// signed 295 s ago is accepted while its app is down, and the app stays down past the rest of
// that window. When it comes back: without `resign` the app refuses the original signature as
// too old (401) and the event becomes a dead letter; with `resign` hookgate signs it afresh and
// the app's unchanged check passes. The same for the task-callback app (checked by hand), for
// Stripe and for Standard Webhooks (checked by the providers' own npm libraries), and for an app
// that checks hookgate's own `sign_upstream` signature with standardwebhooks. Every route runs in
// one Caddy and waits out one shared outage.

const (
	resignTaskSecret     = "task_callback_e2e_secret"
	resignStripeSecret   = "whsec_e2e_stripe_resign_secret"
	resignOldSecret      = "whsec_cHJldmlvdXMgc3RhbmRhcmQgc2VjcmV0LCAzMiBiISE=" // a standard secret being rotated out
	resignGatewaySecret  = "whsec_aG9va2dhdGUgZTJlIGdhdGV3YXkgc2VjcmV0IDMyYiE="
	resignSignedAgo      = 295 * time.Second // the event's age when hookgate accepts it, just inside the window
	resignProviderWindow = 300 * time.Second // the apps' (and the providers' libraries') window; the routes allow a minute more, so a slow send is still accepted
	resignOutageMargin   = 5 * time.Second   // the apps stay down this much past the window
)

// resignCase is one route of the proof and the app behind it.
type resignCase struct {
	name   string // the route's name and path /hooks/<name>; its event is evt_<name>
	scheme string // how the provider signs: task, stripe or standard
	route  string // extra lines in the route
	resign bool   // forward { resign }
	app    string // the app's check: task (by hand), or the library app's stripe or standard
	secret string // the app's secret
}

var resignCases = []resignCase{
	{name: "tasks-late", scheme: "task", app: "task", secret: resignTaskSecret},
	{name: "tasks-resign", scheme: "task", resign: true, app: "task", secret: resignTaskSecret},
	{name: "stripe-late", scheme: "stripe", app: "stripe", secret: resignStripeSecret},
	{name: "stripe-resign", scheme: "stripe", resign: true, app: "stripe", secret: resignStripeSecret},
	{name: "standard-late", scheme: "standard", app: "standard", secret: hooktest.Secret},
	// The provider still signs with the secret being rotated out; the app knows the new one,
	// the route's first: re-signing uses the first.
	{name: "standard-resign", scheme: "standard", route: "secret {env.RESIGN_OLD_SECRET}", resign: true, app: "standard", secret: hooktest.Secret},
	// The app trusts hookgate's signature instead of the provider's.
	{name: "stripe-gateway", scheme: "stripe", route: "sign_upstream {env.RESIGN_GATEWAY_SECRET}", app: "standard", secret: resignGatewaySecret},
}

// delivered reports whether the case's event must reach its app: re-signed, or signed by hookgate.
func (c resignCase) delivered() bool { return c.resign || strings.Contains(c.route, "sign_upstream") }

// schemeLines configures how the route verifies the provider: the task-callback scheme as in
// examples/seed_task_callback.Caddyfile, or a preset.
func (c resignCase) schemeLines() string {
	switch c.scheme {
	case "task":
		return `preset generic
		secret {env.RESIGN_TASK_SECRET}
		signature_header x-webhook-signature
		prefix sha256=
		encoding hex
		signed "{timestamp}.{body}"
		timestamp_header x-webhook-timestamp
		timestamp_unit s
		id header x-webhook-id
		version json data.task_id json data.version`
	case "stripe":
		return "preset stripe\n\t\tsecret {env.RESIGN_STRIPE_SECRET}"
	}
	return "preset standard\n\t\tsecret {env.HOOKGATE_SECRET}"
}

// signed is the case's event as its provider sends it, signed at ts.
func (c resignCase) signed(t *testing.T, ts time.Time) (id, body string, header http.Header) {
	t.Helper()
	id = "evt_" + c.name
	switch c.scheme {
	case "task":
		body = fmt.Sprintf(`{"data":{"task_id":"task_%s","version":1,"status":"done"}}`, c.name)
		unix := strconv.FormatInt(ts.Unix(), 10)
		return id, body, http.Header{
			"X-Webhook-Id":        {id},
			"X-Webhook-Timestamp": {unix},
			"X-Webhook-Signature": {taskSignature(resignTaskSecret, unix, []byte(body))},
		}
	case "stripe":
		body = fmt.Sprintf(`{"id":%q,"object":"event","type":"invoice.paid","data":{"object":{"id":"in_%s"}}}`, id, c.name)
		return id, body, presetSigned(t, "stripe", resignStripeSecret, id, ts, body)
	}
	secret := hooktest.Secret
	if strings.Contains(c.route, "RESIGN_OLD_SECRET") {
		secret = resignOldSecret
	}
	body = fmt.Sprintf(`{"type":"order.paid","data":{"object":{"id":"ord_%s"}}}`, c.name)
	return id, body, presetSigned(t, "standard", secret, id, ts, body)
}

func presetSigned(t *testing.T, preset, secret, id string, ts time.Time, body string) http.Header {
	t.Helper()
	cfg, _ := verify.Preset(preset)
	h, err := verify.Sign(cfg, secret, id, ts, []byte(body))
	if err != nil {
		t.Fatalf("signing as %s: %v", preset, err)
	}
	return h
}

// resignCaddyfile is one site with every case's route, each forwarding to its app with short
// retries, enough of them to outlast the outage.
func resignCaddyfile(taskAppURL, libraryAppURL string) string {
	var routes strings.Builder
	for _, c := range resignCases {
		upstream, resign := libraryAppURL, ""
		if c.app == "task" {
			upstream = taskAppURL
		}
		if c.resign {
			resign = "\n\t\t\tresign"
		}
		fmt.Fprintf(&routes, `
	hookgate /hooks/%[1]s {
		name %[1]s
		%[2]s
		%[3]s
		tolerance 6m
		forward %[4]s {
			backoff 2s
			jitter none
			max_attempts 60%[5]s
		}
	}
`, c.name, c.schemeLines(), c.route, upstream, resign)
	}
	return `{
	admin {$HOOKGATE_ADMIN}
}

http://localhost:{$HOOKGATE_PORT} {
	bind 127.0.0.1
` + routes.String() + "}\n"
}

// adminEvent is the part of the admin API's event view the proof reads.
type adminEvent struct {
	State      string `json:"state"`
	Attempts   int    `json:"attempts"`
	LastStatus int    `json:"last_status"`
	LastError  string `json:"last_error"`
}

func (g *binaryGateway) event(t *testing.T, route, id string) adminEvent {
	t.Helper()
	var admin string
	for _, kv := range g.env {
		if v, ok := strings.CutPrefix(kv, "HOOKGATE_ADMIN="); ok {
			admin = v
		}
	}
	resp, err := http.Get("http://" + admin + "/hookgate/events/" + route + "/" + id)
	if err != nil {
		t.Fatalf("admin API: %v", err)
	}
	defer resp.Body.Close()
	var ev adminEvent
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("admin API: event %s of %s: %d %v", id, route, resp.StatusCode, err)
	}
	return ev
}

func TestE2EResignAfterOutage(t *testing.T) {
	t.Parallel()
	caddyfile := filepath.Join(t.TempDir(), "Caddyfile")
	g := newBinaryGateway(t, caddyfile)
	tasks := startTaskApp(t, resignTaskSecret)
	libraryRoutes := map[string]libraryRoute{}
	for _, c := range resignCases {
		if c.app != "task" {
			libraryRoutes["/hooks/"+c.name] = libraryRoute{Verifier: c.app, Secret: c.secret}
		}
	}
	library := startLibraryApp(t, libraryRoutes)
	if err := os.WriteFile(caddyfile, []byte(resignCaddyfile(tasks.URL, library.url)), 0o600); err != nil {
		t.Fatal(err)
	}
	g.env = append(g.env,
		"RESIGN_TASK_SECRET="+resignTaskSecret,
		"RESIGN_STRIPE_SECRET="+resignStripeSecret,
		"RESIGN_OLD_SECRET="+resignOldSecret,
		"RESIGN_GATEWAY_SECRET="+resignGatewaySecret,
	)
	g.start(t)

	// The provider signed each event 295 s before it is sent; hookgate accepts each while the
	// apps are down.
	var signedAt time.Time
	client := &http.Client{Timeout: 10 * time.Second}
	for _, c := range resignCases {
		signedAt = time.Now().Add(-resignSignedAgo)
		id, body, header := c.signed(t, signedAt)
		ev := &hooktest.Event{ID: id, Body: body, Headers: header}
		got, err := hooktest.TrySendTo(client, fmt.Sprintf("http://localhost:%d/hooks/%s", g.port, c.name), ev)
		if err != nil {
			t.Fatalf("%s: sending: %v", c.name, err)
		}
		hooktest.ExpectReply(t, c.name+": accepted 295 s after signing", got, http.StatusAccepted, id)
	}

	// One outage for every route, until the original signatures (the last one signed included)
	// are past the apps' window.
	upAt := signedAt.Add(resignProviderWindow + resignOutageMargin)
	t.Logf("events accepted; the apps stay down for %v", time.Until(upAt).Round(time.Second))
	time.Sleep(time.Until(upAt))
	for _, c := range resignCases {
		ev := g.event(t, c.name, "evt_"+c.name)
		if ev.State != "pending" || ev.Attempts < 2 || ev.LastStatus != http.StatusServiceUnavailable {
			t.Fatalf("%s: during the outage the event is %s after %d attempts (last %d %s), want pending, retried against the 503s",
				c.name, ev.State, ev.Attempts, ev.LastStatus, ev.LastError)
		}
	}
	tasks.up.Store(true)
	library.bringUp(t)
	cameUp := time.Now()

	for _, c := range resignCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			id := "evt_" + c.name
			var ev adminEvent
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				if ev = g.event(t, c.name, id); ev.State != "pending" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("still pending 30s after the app came back: %d attempts, last %d %s", ev.Attempts, ev.LastStatus, ev.LastError)
				}
			}
			records := tasks.records()
			if c.app != "task" {
				records = library.records(t)
			}
			last := lastAnswer(records, "/hooks/"+c.name)
			t.Logf("%s after %d attempts, %v after the app came back (last status %d); the app's last answer: %d id=%q signed %s before it came back %s",
				ev.State, ev.Attempts, time.Since(cameUp).Round(time.Millisecond), ev.LastStatus, last.Status, last.ID, signedBefore(last.Timestamp, cameUp), last.Error)
			if c.delivered() {
				if ev.State != "delivered" || last.Status != http.StatusOK {
					t.Fatalf("event %s (last status %d: %s), want delivered and accepted by the app's own check; the app answered %d: %s",
						ev.State, ev.LastStatus, ev.LastError, last.Status, last.Error)
				}
				if c.resign && last.ID != id {
					t.Fatalf("the app accepted event %q, want %q", last.ID, id)
				}
				return
			}
			if ev.State != "dead" || ev.LastStatus != http.StatusUnauthorized || last.Status != http.StatusUnauthorized {
				t.Fatalf("event %s (last status %d: %s), want a dead letter refused 401 by the app; the app answered %d: %s",
					ev.State, ev.LastStatus, ev.LastError, last.Status, last.Error)
			}
		})
	}
}

// signedBefore is how long before ref a request's signature timestamp (unix seconds) was.
func signedBefore(ts string, ref time.Time) string {
	seconds, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Sprintf("(timestamp %q)", ts)
	}
	return ref.Sub(time.Unix(seconds, 0)).Round(time.Second).String()
}

// lastAnswer is the app's last answer on path that was not an outage's 503.
func lastAnswer(records []appRecord, path string) appRecord {
	var last appRecord
	for _, r := range records {
		if r.Path == path && r.Status != http.StatusServiceUnavailable {
			last = r
		}
	}
	return last
}
