package jsonpath

import (
	"slices"
	"strings"
	"testing"
)

// A `\` keeps a dot or a query character in its key; unescaped, a query character is refused.
// (caddymodule's event_json_test.go checks the refusals through the routes that read paths.)
func TestParse(t *testing.T) {
	steps, err := Parse(`meta\.data.list.1.\*`)
	if want := []string{"meta.data", "list", "1", "*"}; err != nil || !slices.Equal(steps, want) {
		t.Fatalf("Parse: %q, %v; want %q", steps, err, want)
	}
	if _, err := Parse("data.*.type"); err == nil || !strings.Contains(err.Error(), "`*` is gjson query syntax") {
		t.Fatalf("Parse(data.*.type): %v, want it refused", err)
	}
}
