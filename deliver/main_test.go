package deliver

import (
	"os"
	"testing"

	"github.com/hookgate/hookgate/internal/paralleltest"
)

// TestMain runs up to 8 parallel tests at once: they wait on upstreams, retries and pauses far
// more than they compute.
func TestMain(m *testing.M) {
	paralleltest.Default(8)
	os.Exit(m.Run())
}
