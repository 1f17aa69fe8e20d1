package verify

import (
	"fmt"
	"os"
	"testing"

	"github.com/hookgate/hookgate/internal/paralleltest"
)

// TestMain stops the provider oracle (oracle_test.go) once the package's tests are done, and
// removes the builds without the race detector (form_allocs_test.go).
func TestMain(m *testing.M) {
	// The parallel tests wait on node and on builds, not on the CPU.
	paralleltest.Default(8)
	var err error
	if noRaceDir, err = os.MkdirTemp("", "verify-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stopOracle()
	os.RemoveAll(noRaceDir)
	os.Exit(code)
}
