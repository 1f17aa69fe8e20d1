package caddymodule

import (
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

	"github.com/hookgate/hookgate/verify"
)

// The operator's order with hubspot, whose signature covers the URL it called: an outage, the
// app's window passes, resign is turned on by a reload, the app comes back. The event queued
// before the reload is re-signed over the URL the provider called (kept with it although resign
// was off), passes the app's own check, and the kept URL never reaches the app.
func TestResignTurnedOnByReloadResignsHubspotBacklog(t *testing.T) {
	const route = "resign_hubspot_reload"
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	config := func(extra ...string) string {
		return presetGatewayConfig("hubspot", route, unusedUpstream, asyncRoute(addr, append([]string{"max_attempts 1000"}, extra...)...))
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(config(), "caddyfile")

	cfg, _ := verify.Preset("hubspot")
	body := `[{"eventId":4242,"subscriptionType":"contact.creation"}]`
	signed := &verify.Message{Header: http.Header{}, Body: []byte(body), Method: http.MethodPost, URL: gateURL}
	if err := verify.SignMessage(cfg, testSecret, "", time.Now(), signed); err != nil {
		t.Fatal(err)
	}
	expectReply(t, "accepted while the app is down", send(t, tester.Client, &event{id: "4242", body: body, headers: signed.Header}), http.StatusAccepted, "")
	time.Sleep(appWindow + 500*time.Millisecond) // the outage outlasts the app's window

	tester.InitServer(config("resign"), "caddyfile")
	cfg.Tolerance = appWindow
	check, err := verify.New(cfg, []string{testSecret})
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
