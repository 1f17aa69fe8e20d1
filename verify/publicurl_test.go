package verify

import "testing"

// A public URL with no path takes the request's path and query; one with a path or query, or one
// that is no absolute http(s) URL (say, a placeholder that expanded to nothing), is kept as it is.
func TestPublicURL(t *testing.T) {
	for _, tc := range []struct{ public, want string }{
		{"https://hooks.example.com", "https://hooks.example.com/hooks/square?x=1"},
		{"https://hooks.example.com/", "https://hooks.example.com/hooks/square?x=1"},
		{"https://hooks.example.com/sq/in/", "https://hooks.example.com/sq/in/"},
		{"https://hooks.example.com?tenant=1", "https://hooks.example.com?tenant=1"},
		{"", ""},
		{"hooks.example.com", "hooks.example.com"},
	} {
		if got := PublicURL(tc.public, "/hooks/square?x=1"); got != tc.want {
			t.Errorf("PublicURL(%q): %q, want %q", tc.public, got, tc.want)
		}
	}
	if _, err := ParsePublicURL("ftp://hooks.example.com"); err == nil {
		t.Error("ParsePublicURL took an ftp URL")
	}
}
