//go:build e2e

package e2e

import (
	"os/exec"
	"testing"
)

// need is the path of program, which Debian's package pkg installs; without it the test fails
// saying what to install (`./xcaddy.sh test` installs every tool these tests run).
func need(t *testing.T, program, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	if err != nil {
		t.Fatalf("%s is not installed: apt-get update && apt-get install -y %s (./xcaddy.sh test installs it): %v", program, pkg, err)
	}
	return path
}
