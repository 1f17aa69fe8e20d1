package caddymodule

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/hookgate/hookgate/internal/hooktest"
)

func TestUnmarshalCaddyfileVersionTTL(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("hookgate {\n preset stripe\n version_ttl 240h\n}")); err != nil {
		t.Fatal(err)
	}
	if h.VersionTTL != caddy.Duration(240*time.Hour) {
		t.Fatalf("version_ttl 240h parsed as %v", time.Duration(h.VersionTTL))
	}
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("hookgate {\n version_ttl soon\n}"))
	if err == nil || !strings.Contains(err.Error(), "version_ttl") {
		t.Fatalf("version_ttl soon: %v, want an error naming version_ttl", err)
	}
}

// A version kept for less than the dedupe window would let a provider's retry of an older event
// through while the retry of the same event is still caught: refused when the config loads.
func TestVersionTTLShorterThanDedupeTTLIsRefused(t *testing.T) {
	err := validateCaddyfile(t, gatewayConfig("vttl", unusedUpstream, "version_ttl 24h"))
	if err == nil || !strings.Contains(err.Error(), "version_ttl (24h0m0s) must be at least dedupe_ttl (72h0m0s)") {
		t.Fatalf("version_ttl 24h under the default dedupe_ttl: %v, want it refused", err)
	}
	if err := validateCaddyfile(t, gatewayConfig("vttl", unusedUpstream, "version_ttl 72h")); err != nil {
		t.Fatalf("version_ttl equal to dedupe_ttl: %v", err)
	}
	// The default follows a dedupe_ttl longer than 30 days.
	if err := validateCaddyfile(t, gatewayConfig("vttl", unusedUpstream, "dedupe_ttl 1000h")); err != nil {
		t.Fatalf("dedupe_ttl 1000h with the default version_ttl: %v", err)
	}
}

// Once an entity's version has expired, an older event of it is no longer known to be stale.
func TestOlderVersionGoesThroughAfterVersionTTL(t *testing.T) {
	up := hooktest.NewUpstream(t)
	tester := startGateway(t, "vttl", up, "dedupe_ttl 1s", "version_ttl 2s")

	hooktest.ExpectReply(t, "v2", send(t, tester.Client, hooktest.NewEvent(t, "evt_vttl_v2", "obj_vttl", 2)), http.StatusOK, "upstream says hi")
	advanced := time.Now()
	hooktest.ExpectReply(t, "v1 within version_ttl", send(t, tester.Client, hooktest.NewEvent(t, "evt_vttl_v1", "obj_vttl", 1)), http.StatusOK, `"stale":true`)
	time.Sleep(time.Until(advanced.Add(2*time.Second + 200*time.Millisecond)))
	hooktest.ExpectReply(t, "v1 after version_ttl", send(t, tester.Client, hooktest.NewEvent(t, "evt_vttl_v1b", "obj_vttl", 1)), http.StatusOK, "upstream says hi")
}
