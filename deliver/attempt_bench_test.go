package deliver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// BenchmarkAttempt is what one delivery attempt costs the deliverer: building the outgoing
// request from a leased 1 KiB event with a provider's headers, sending it, reading and
// classifying the 200. "answered" is an upstream in the client itself (a RoundTripper that
// reads the body and answers), so allocs/op and B/op are hookgate's own and the client's
// plumbing; "loopback" is a real upstream on 127.0.0.1, its server's allocations included.
func BenchmarkAttempt(b *testing.B) {
	ev := &dedupe.Event{
		ID: "evt_0000000001", Method: http.MethodPost, URI: "/hooks/bench?x=1", Scheme: "standard",
		Body: []byte(`{"id":"evt_0000000001","pad":"` + strings.Repeat("x", 1000) + `"}`),
		Header: http.Header{
			"Content-Type":      {"application/json"},
			"User-Agent":        {"Provider-Webhooks/1.0"},
			"Accept-Encoding":   {"gzip"},
			"Webhook-Id":        {"evt_0000000001"},
			"Webhook-Timestamp": {"1764633600"},
			"Webhook-Signature": {"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="},
		},
	}
	answer := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}
	b.Run("answered", func(b *testing.B) {
		target, _ := url.Parse("http://127.0.0.1:1")
		client := &http.Client{Transport: answeringTransport{}}
		benchAttempts(b, client, Config{Target: target, Timeout: time.Minute}, ev)
	})
	b.Run("loopback", func(b *testing.B) {
		upstream := httptest.NewServer(http.HandlerFunc(answer))
		defer upstream.Close()
		target, _ := url.Parse(upstream.URL)
		client := newClient(1)
		defer client.CloseIdleConnections()
		benchAttempts(b, client, Config{Target: target, Timeout: time.Minute}, ev)
	})
}

func benchAttempts(b *testing.B, client *http.Client, cfg Config, ev *dedupe.Event) {
	b.ReportAllocs()
	b.SetBytes(int64(len(ev.Body)))
	for b.Loop() {
		if result := attempt(context.Background(), client, cfg, ev, 1); result.verdict != delivered {
			b.Fatalf("verdict %d: %s", result.verdict, result.problem)
		}
	}
}

// answeringTransport answers every request 200 with a short body once it has read the request's.
type answeringTransport struct{}

func (answeringTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return nil, err
	}
	_ = r.Body.Close()
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"ok":true}`)), ContentLength: 11,
	}, nil
}
