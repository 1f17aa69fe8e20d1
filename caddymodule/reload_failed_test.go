package caddymodule

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// A reload that fails to start keeps the old config running, so deliveries must keep going
// where the old config says. Caddy starts apps in map order, so the hookgate app of the failed
// config starts (and so reconfigures the shared deliverer) before the http app fails in about
// half the attempts; several attempts make that all but certain.
func TestFailedReloadKeepsDeliveringToTheRunningUpstream(t *testing.T) {
	running, other := hooktest.NewUpstream(t), hooktest.NewUpstream(t)
	tester := startAsyncGateway(t, "failedreload", running.Listener.Addr().String())

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	failing := gatewayConfig("failedreload", unusedUpstream, asyncRoute(other.Listener.Addr().String())) +
		fmt.Sprintf("http://127.0.0.1:%d {\n\tbind 127.0.0.1\n\trespond \"port taken\"\n}\n", taken.Addr().(*net.TCPAddr).Port)
	for range 8 {
		if status, body := loadCaddyfile(t, failing); status == http.StatusOK {
			t.Fatalf("a config whose port is taken loaded: %s", body)
		}
	}

	ev := hooktest.NewEvent(t, "evt_failedreload", "obj_failedreload", 1)
	hooktest.ExpectReply(t, "accepted", send(t, tester.Client, ev), http.StatusAccepted, "")
	hooktest.WaitFor(t, "delivery to the running config's upstream", 10*time.Second, func() bool {
		return running.Count("evt_failedreload") == 1
	})
	if n := other.Total(); n != 0 {
		t.Fatalf("the failed config's upstream got %d deliveries", n)
	}
}

// loadCaddyfile posts a Caddyfile to the admin endpoint's /load once the last load has settled:
// each load replaces the admin server, failed ones too (see awaitLoadSettled).
func loadCaddyfile(t *testing.T, caddyfile string) (int, string) {
	t.Helper()
	awaitLoadSettled(t, http.DefaultClient)
	resp, err := http.Post("http://localhost:2999/load", "text/caddyfile", strings.NewReader(caddyfile))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
