package caddymodule

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Route names are how the admin API, the CLI and /metrics tell routes apart: two routes of one
// name in different stores would share every series and leave the admin API unable to say which
// one a request means. Such a config is refused when it is loaded, naming both stores.
func TestRoutesOfOneNameInTwoStoresAreRefused(t *testing.T) {
	site := func(port int, name, dir string) string {
		return fmt.Sprintf(`http://localhost:%d {
	bind 127.0.0.1
	hookgate /hooks/* {
		preset  standard
		secret  {env.HOOKGATE_TEST_SECRET}
		name    %s
		storage badger %s
		forward http://%s
	}
	respond 200
}
`, port, name, dir, unusedUpstream)
	}
	global := "{\n\tskip_install_trust\n\tadmin off\n}\n"
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	err := validateCaddyfile(t, global+site(9181, "orders", a)+site(9182, "orders", b))
	if err == nil || !strings.Contains(err.Error(), `two routes are named "orders"`) ||
		!strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
		t.Fatalf("two routes named orders in two stores: %v, want them refused, naming both stores", err)
	}
	if err := validateCaddyfile(t, global+site(9181, "orders", a)+site(9182, "refunds", b)); err != nil {
		t.Fatalf("two names in two stores: %v", err)
	}
}
