package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/verify"
)

// presetGatewayConfig is gatewayConfig with another preset and no version check.
func presetGatewayConfig(preset, name, upstreamAddr string, extra ...string) string {
	cfg := gatewayConfig(name, upstreamAddr, extra...)
	cfg = strings.Replace(cfg, "preset  standard", "preset  "+preset, 1)
	return strings.Replace(cfg, "version json data.object.id json data.object.updated", "", 1)
}

// presetEvent is a request signed the way preset's provider signs it, with id in its ID header.
func presetEvent(t *testing.T, preset, id, body string) *hooktest.Event {
	t.Helper()
	cfg, _ := verify.Preset(preset)
	hdr, err := verify.Sign(cfg, hooktest.Secret, id, time.Now(), []byte(body))
	if err != nil {
		t.Fatalf("signing: %v", err)
	}
	return &hooktest.Event{ID: id, Body: body, Headers: hdr}
}

// GitHub and Shopify sign neither their delivery ID nor a timestamp: a captured request replayed
// under a fresh ID header must be a duplicate, in both modes, while new bodies still go through.
func TestReplayUnderFreshUnsignedIDIsDuplicate(t *testing.T) {
	for _, preset := range []string{"github", "shopify"} {
		idHeader := map[string]string{"github": "X-GitHub-Delivery", "shopify": "X-Shopify-Webhook-Id"}[preset]
		for _, mode := range []string{"sync", "async"} {
			t.Run(preset+"/"+mode, func(t *testing.T) {
				up := hooktest.NewUpstream(t)
				name := "replay_" + preset + "_" + mode
				upstreamAddr, extra := up.Listener.Addr().String(), []string(nil)
				wantStatus, wantBody := http.StatusOK, "upstream says hi"
				if mode == "async" {
					extra = []string{asyncRoute(upstreamAddr)}
					upstreamAddr, wantStatus, wantBody = unusedUpstream, http.StatusAccepted, `"received":true`
				}
				tester := caddytest.NewTester(t)
				tester.InitServer(presetGatewayConfig(preset, name, upstreamAddr, extra...), "caddyfile")

				first := presetEvent(t, preset, name+"-1", fmt.Sprintf(`{"action":"opened","route":%q}`, name))
				hooktest.ExpectReply(t, "first delivery", send(t, tester.Client, first), wantStatus, wantBody)

				replay := &hooktest.Event{ID: name + "-2", Body: first.Body, Headers: first.Headers.Clone()}
				replay.Headers.Set(idHeader, replay.ID)
				hooktest.ExpectReply(t, "the same signed bytes under a fresh ID", send(t, tester.Client, replay), http.StatusOK, `"duplicate":true`)
				hooktest.ExpectReply(t, "the provider's redelivery, same ID", send(t, tester.Client, first), http.StatusOK, `"duplicate":true`)

				next := presetEvent(t, preset, name+"-3", fmt.Sprintf(`{"action":"closed","route":%q}`, name))
				hooktest.ExpectReply(t, "a new event", send(t, tester.Client, next), wantStatus, wantBody)

				hooktest.WaitFor(t, "both events delivered", 10*time.Second, func() bool { return up.Count(first.ID) == 1 && up.Count(next.ID) == 1 })
				if n := up.Count(replay.ID); n != 0 || up.Total() != 2 {
					t.Fatalf("upstream saw the replay %d times and %d requests in all, want 0 and 2", n, up.Total())
				}
			})
		}
	}
}

// A source the signature does not cover is refused where the scheme offers a signed one.
func TestProvisionRefusesUnsignedSources(t *testing.T) {
	header := func(name string) *Source { return &Source{From: "header", Name: name} }
	json := func(path string) Source { return Source{From: "json", Name: path} }
	for name, tc := range map[string]struct {
		h       Handler
		wantErr string // "" when the sources are fine
	}{
		"standard, another id header": {Handler{Preset: "standard", ID: header("X-Other")}, "preset standard takes its event ID from header webhook-id"},
		"stripe, an id header":        {Handler{Preset: "stripe", ID: header("X-Request-Id")}, "preset stripe takes its event ID from JSON field id"},
		"slack, an id header":         {Handler{Preset: "slack", ID: header("X-Slack-Retry-Num")}, "the signature does not cover it"},
		"version from an unsigned header": {Handler{Preset: "standard",
			Version: &VersionSource{Entity: json("data.id"), Version: Source{From: "header", Name: "X-Version"}}}, "header X-Version is not covered"},
		"entity from an unsigned header": {Handler{Preset: "github",
			Version: &VersionSource{Entity: Source{From: "header", Name: "X-Entity"}, Version: json("data.v")}}, "header X-Entity is not covered"},

		"standard, its own id header":       {Handler{Preset: "standard", ID: header("Webhook-Id")}, ""},
		"github, another id header":         {Handler{Preset: "github", ID: header("X-Other-Delivery")}, ""},
		"stripe, another json path":         {Handler{Preset: "stripe", ID: &Source{From: "json", Name: "data.object.id"}}, ""},
		"version from the signed timestamp": {Handler{Preset: "slack", Version: &VersionSource{Entity: json("team_id"), Version: Source{From: "header", Name: "X-Slack-Request-Timestamp"}}}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
			defer cancel()
			h := tc.h
			h.Secrets = []string{hooktest.Secret}
			// Provision stops at the storage, after the sources were checked: a config that passes
			// them fails there, so nothing is opened.
			h.Storage = &Storage{Backend: "none"}
			err := h.Provision(ctx)
			want := tc.wantErr
			if want == "" {
				want = "unknown storage backend"
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one containing %q", err, want)
			}
		})
	}
}
