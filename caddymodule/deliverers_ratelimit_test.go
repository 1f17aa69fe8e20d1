package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// A route under `rate 1/m` delivers its first event at once and holds the rest queued (already
// acknowledged); `caddy hookgate status` and the page's route listing show the rate and the
// time the backlog needs at it.
func TestStatusShowsRateAndDrainTime(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startAsyncGateway(t, "ratestatus", up.Listener.Addr().String(), "rate 1/m")
	const events = 5
	for i := range events {
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_rate_%d", i), fmt.Sprintf("obj_rate_%d", i), 1)
		hooktest.ExpectReply(t, "an event under the rate", send(t, tester.Client, ev), http.StatusAccepted, "")
	}
	hooktest.WaitFor(t, "the first event delivered", 20*time.Second, func() bool {
		backlog, _ := routeBacklog(t, "ratestatus")
		return backlog == events-1
	})

	var status struct {
		Backlog   int    `json:"backlog"`
		Rate      string `json:"rate"`
		DrainTime string `json:"drain_time"`
	}
	out := hookgateCLI(t, "status", "ratestatus")
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Fatalf("status %s: %v", out, err)
	}
	t.Logf("status: %s", out)
	if status.Backlog != events-1 || status.Rate != "1/m" || status.DrainTime != "4m0s" {
		t.Errorf("status: backlog %d, rate %q, drain_time %q; want %d, 1/m, 4m0s", status.Backlog, status.Rate, status.DrainTime, events-1)
	}
	if got := up.Total(); got != 1 {
		t.Errorf("the upstream got %d events within the first minute, want 1 under rate 1/m", got)
	}

	code, body := admin(t, http.MethodGet, "/hookgate/routes")
	var page struct {
		Routes []struct {
			Name      string `json:"name"`
			Rate      string `json:"rate"`
			DrainTime string `json:"drain_time"`
		} `json:"routes"`
	}
	if err := json.Unmarshal([]byte(body), &page); code != http.StatusOK || err != nil {
		t.Fatalf("routes: %d %s (%v)", code, body, err)
	}
	listed := false
	for _, r := range page.Routes {
		if r.Name == "ratestatus" {
			listed = true
			if r.Rate != "1/m" || r.DrainTime != "4m0s" {
				t.Errorf("the page's listing: rate %q, drain_time %q; want 1/m and 4m0s", r.Rate, r.DrainTime)
			}
		}
	}
	if !listed {
		t.Errorf("the page's listing has no route ratestatus: %s", body)
	}
}
