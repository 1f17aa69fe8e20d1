package hooktest

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// CurlArgs runs a printed curl command (`caddy hookgate sign` prints one) through a real shell,
// with curl replaced by a function that prints its arguments, so quoting is checked the way a
// user's shell will see it.
func CurlArgs(t testing.TB, line string) []string {
	t.Helper()
	out, err := exec.Command("sh", "-c", `curl() { for a in "$@"; do printf '%s\0' "$a"; done; }; `+line).Output()
	if err != nil {
		t.Fatalf("running %q: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// ParseCurl turns curl arguments (CurlArgs) back into the request they describe.
func ParseCurl(args []string) (url string, hdr http.Header, body string) {
	hdr = http.Header{}
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-sS":
		case "-X":
			i++
		case "-H":
			i++
			name, value, _ := strings.Cut(args[i], ": ")
			hdr.Add(name, value)
		case "--data-binary":
			i++
			body = args[i]
		default:
			url = args[i]
		}
	}
	return url, hdr, body
}
