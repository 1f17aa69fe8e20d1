package verify

import (
	"os"
	"testing"
)

// TestMain stops the provider oracle (oracle_test.go) once the package's tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	stopOracle()
	os.Exit(code)
}
