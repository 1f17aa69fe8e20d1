package deliver

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

func TestJoinTarget(t *testing.T) {
	tests := []struct {
		target, uri, want string
	}{
		{"http://127.0.0.1:3000", "/hooks/stripe", "http://127.0.0.1:3000/hooks/stripe"},
		{"http://127.0.0.1:3000/", "/hooks?a=1&b=2", "http://127.0.0.1:3000/hooks?a=1&b=2"},
		{"https://app/base", "/hooks/x?q=%2F", "https://app/base/hooks/x?q=%2F"},
		{"https://app/base/", "/a%2Fb/c", "https://app/base/a%2Fb/c"},
		{"http://app", "/", "http://app/"},
		{"http://app", "/x?", "http://app/x?"},
		// An absolute-form URI keeps only its path and query: never another host.
		{"http://app", "http://evil.example/steal?x=1", "http://app/steal?x=1"},
	}
	for _, tt := range tests {
		target, err := url.Parse(tt.target)
		if err != nil {
			t.Fatal(err)
		}
		got, err := joinTarget(target, tt.uri)
		if err != nil {
			t.Errorf("joinTarget(%q, %q): %v", tt.target, tt.uri, err)
			continue
		}
		if got.String() != tt.want {
			t.Errorf("joinTarget(%q, %q) = %q, want %q", tt.target, tt.uri, got, tt.want)
		}
	}
}

func TestJoinTargetRefusesWhatIsNotAPath(t *testing.T) {
	target, _ := url.Parse("http://app")
	for _, uri := range []string{"", "hooks", "*", "%zz", "/a b\x7f"} {
		if got, err := joinTarget(target, uri); err == nil {
			t.Errorf("joinTarget(%q) = %q, want an error", uri, got)
		}
	}
}

func TestForwardedHeaderDropsHopByHopAndOurs(t *testing.T) {
	received := http.Header{
		"Content-Type":        {"application/json"},
		"X-Multi":             {"a", "b"},
		"Stripe-Signature":    {"t=1,v1=abc"},
		"Connection":          {"keep-alive, X-Conn-Listed"},
		"X-Conn-Listed":       {"drop me"},
		"Keep-Alive":          {"timeout=5"},
		"Proxy-Authorization": {"Basic x"},
		"Proxy-Connection":    {"keep-alive"},
		"Te":                  {"trailers"},
		"Trailer":             {"X-T"},
		"Transfer-Encoding":   {"chunked"},
		"Upgrade":             {"websocket"},
		"Content-Length":      {"999"},
		"Hookgate-Event-Id":   {"spoofed"},
		"hookgate-attempt":    {"99"}, // not canonical, as a map literal can hold it
	}
	got, _ := forwardedHeader(received, 0)
	want := http.Header{
		"Content-Type":     {"application/json"},
		"X-Multi":          {"a", "b"},
		"Stripe-Signature": {"t=1,v1=abc"},
	}
	if len(got) != len(want) {
		t.Errorf("forwarded %v, want %v", got, want)
	}
	for name, values := range want {
		if !slices.Equal(got[name], values) {
			t.Errorf("%s = %q, want %q", name, got[name], values)
		}
	}
	got["X-Multi"][0] = "changed"
	if received["X-Multi"][0] != "a" {
		t.Error("forwardedHeader shares value slices with the event")
	}
}

func TestNewAttemptRequestAddsOurHeaders(t *testing.T) {
	target, _ := url.Parse("http://app")
	ev := &dedupe.Event{ID: "evt_1", Method: "PATCH", URI: "/x", Scheme: "github", Body: []byte("{}"),
		Header: http.Header{"Hookgate-Verified": {"forged"}}}
	req, err := newAttemptRequest(context.Background(), target, ev, 3)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"Hookgate-Event-Id": "evt_1", "Hookgate-Attempt": "3", "Hookgate-Verified": "github"} {
		if got := req.Header.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want just %q", name, got, want)
		}
	}
	if req.Method != "PATCH" || req.ContentLength != 2 {
		t.Errorf("method %s, content length %d; want PATCH, 2", req.Method, req.ContentLength)
	}
}

func TestNewAttemptRequestRefusesABadMethod(t *testing.T) {
	target, _ := url.Parse("http://app")
	ev := &dedupe.Event{ID: "evt_1", Method: "NOT A METHOD", URI: "/x"}
	if _, err := newAttemptRequest(context.Background(), target, ev, 1); err == nil {
		t.Error("newAttemptRequest with method \"NOT A METHOD\": want an error")
	}
}

func TestClassifyStatus(t *testing.T) {
	now := time.Now()
	tests := []struct {
		status  int
		verdict verdict
		problem string
	}{
		{200, delivered, ""},
		{204, delivered, ""},
		{299, delivered, ""},
		{408, retryable, "upstream answered 408 Request Timeout"},
		{429, retryable, "upstream answered 429 Too Many Requests"},
		{500, retryable, "upstream answered 500 Internal Server Error"},
		{503, retryable, "upstream answered 503 Service Unavailable"},
		{599, retryable, "upstream answered 599"},
		{301, rejected, "upstream answered 301 Moved Permanently: not retried"},
		{400, rejected, "upstream answered 400 Bad Request: not retried"},
		{404, rejected, "upstream answered 404 Not Found: not retried"},
		{410, rejected, "upstream answered 410 Gone: not retried"},
	}
	for _, tt := range tests {
		got := classifyStatus(&http.Response{StatusCode: tt.status, Header: http.Header{}}, now)
		if got.verdict != tt.verdict || got.status != tt.status || got.problem != tt.problem {
			t.Errorf("classifyStatus(%d) = %+v, want verdict %d, problem %q", tt.status, got, tt.verdict, tt.problem)
		}
	}
	got := classifyStatus(&http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"7"}}}, now)
	if !got.hasRetryAfter || got.retryAfter != 7*time.Second {
		t.Errorf("503 with Retry-After 7: %+v, want a 7s Retry-After", got)
	}
	got = classifyStatus(&http.Response{StatusCode: 404, Header: http.Header{"Retry-After": {"7"}}}, now)
	if got.hasRetryAfter || !strings.HasSuffix(got.problem, "not retried") {
		t.Errorf("404 with Retry-After: %+v, want it ignored", got)
	}
}
