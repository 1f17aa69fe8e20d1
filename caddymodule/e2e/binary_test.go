//go:build e2e

package e2e

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// builtCaddy is the xcaddy-built binary the end-to-end tests run. `./xcaddy.sh test` builds it
// while the unit tests run and names a status file that appears when the build ends ("ok", or
// the failure), so the end-to-end tests wait for it instead of the whole run waiting for the build.
var builtCaddy struct {
	once   sync.Once
	status string
}

// caddyBinary returns HOOKGATE_CADDY_BIN once its build, if still running, has finished. Without
// it the test fails, never skips: a test that did not run proves nothing.
func caddyBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HOOKGATE_CADDY_BIN")
	if bin == "" {
		t.Fatal("HOOKGATE_CADDY_BIN is not set: run ./xcaddy.sh test, or build with ./xcaddy.sh build and set HOOKGATE_CADDY_BIN=$PWD/caddy")
	}
	if statusFile := os.Getenv("HOOKGATE_CADDY_BUILD_STATUS"); statusFile != "" {
		builtCaddy.once.Do(func() { builtCaddy.status = waitForBuild(statusFile) })
		if builtCaddy.status != "ok" {
			t.Fatalf("the caddy build did not succeed: %s", builtCaddy.status)
		}
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("HOOKGATE_CADDY_BIN=%s: %v: build it with ./xcaddy.sh build", bin, err)
	}
	return bin
}

// waitForBuild waits, at most as long as a build can take, for the status file and returns its
// first line.
func waitForBuild(statusFile string) string {
	deadline := time.Now().Add(20 * time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(statusFile); err == nil {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "no build status in " + statusFile + " after 20 minutes"
}
