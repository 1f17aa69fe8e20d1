package caddymodule

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/verify"
)

// BenchmarkRequestPath is what the handler itself costs one signed 1 KiB webhook, with a ledger
// that answers at once (the ledger's own cost is the store's benchmarks'): allocs/op and B/op
// show each change of the request path. The request's scaffolding (a fresh Caddy replacer and
// context, as Caddy makes per request) is counted too, the same in every run.
func BenchmarkRequestPath(b *testing.B) {
	for _, mode := range []string{"sync", "async"} {
		b.Run(mode, func(b *testing.B) {
			f := newRequestPathFixture(b, mode == "async", nil)
			b.ReportAllocs()
			b.SetBytes(int64(len(f.body)))
			for b.Loop() {
				f.serve(b, 0)
			}
		})
	}
	// As served, a provider's request also carries what net/http leaves in Request.Header: nine
	// headers here, which is where a copy of all of them outgrows a small map.
	b.Run("async-served", func(b *testing.B) {
		f := newRequestPathFixture(b, true, nil)
		f.header.Set("Content-Length", strconv.Itoa(len(f.body)))
		f.header.Set("Accept", "*/*")
		f.header.Set("Connection", "keep-alive")
		b.ReportAllocs()
		b.SetBytes(int64(len(f.body)))
		for b.Loop() {
			f.serve(b, 0)
		}
	})
}

// instantStore is a ledger that takes every event at once; accepted, when set, sees each Accept.
type instantStore struct {
	routeLedger
	accepted func(*dedupe.Event)
}

func (*instantStore) Claim(context.Context, dedupe.Claim) (dedupe.Outcome, error) {
	return dedupe.Claimed, nil
}

func (*instantStore) Done(context.Context, dedupe.Claim, time.Duration) error { return nil }

func (*instantStore) Release(context.Context, dedupe.Claim) error { return nil }

func (s *instantStore) Accept(_ context.Context, _ dedupe.Claim, ev *dedupe.Event, _ time.Duration) (dedupe.Outcome, error) {
	if s.accepted != nil {
		s.accepted(ev)
	}
	return dedupe.Claimed, nil
}

// requestPathFixture is a standard-preset route on an instantStore, and the signed requests it
// serves.
type requestPathFixture struct {
	h      *Handler
	next   caddyhttp.Handler
	body   []byte
	header http.Header // signed for event 0; events differ only in their ID (dedupe is instant)
	target *url.URL
	secret string
}

// newRequestPathFixture builds the route; next, when nil, is an upstream that reads the body,
// closes it (as net/http's Transport does once it has sent it) and answers 200.
func newRequestPathFixture(tb testing.TB, async bool, next caddyhttp.Handler) *requestPathFixture {
	tb.Helper()
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	cfg, _ := verify.Preset("standard")
	verifier, err := verify.NewFromKeys(cfg, verify.Keys{Secrets: []string{secret}})
	if err != nil {
		tb.Fatal(err)
	}
	h := &Handler{
		Name: "bench", MaxBody: defaultMaxBody, DedupeTTL: caddy.Duration(time.Hour), Lease: caddy.Duration(time.Minute),
		verifier: verifier, scheme: verifier.Config().Scheme, ID: presetIDSource(cfg), ledger: &instantStore{},
		app: &App{bodyBudget: 64 << 20}, metricsOff: true, logger: zap.NewNop(),
	}
	h.ID.provision()
	if async {
		h.Forward = &Forward{URL: "http://127.0.0.1:1"}
		h.destinations = []*destination{{forward: h.Forward, name: dedupe.DefaultDestination, queue: h.Name, cfg: deliver.Config{MaxPending: 1000}}}
	}
	if next == nil {
		next = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return err
			}
			if err := r.Body.Close(); err != nil {
				return err
			}
			w.WriteHeader(http.StatusOK)
			return nil
		})
	}
	body := []byte(`{"id":"evt_0000000000","type":"bench.event","data":{"pad":"` + strings.Repeat("x", 1024-64) + `"}}`)
	header, err := verify.Sign(cfg, secret, "evt_0000000000", time.Now(), body)
	if err != nil {
		tb.Fatal(err)
	}
	header.Set("Content-Type", "application/json")
	header.Set("User-Agent", "Provider-Webhooks/1.0")
	header.Set("Accept-Encoding", "gzip")
	target, _ := url.Parse("http://127.0.0.1/hooks/bench")
	return &requestPathFixture{h: h, next: next, body: body, header: header, target: target, secret: secret}
}

// serve sends one request, as Caddy would hand it to the handler, and checks its status.
func (f *requestPathFixture) serve(tb testing.TB, want int) {
	f.serveSigned(tb, f.header.Clone(), f.body, want)
}

// signed returns event id's headers and a body of size bytes of fill that carries id.
func (f *requestPathFixture) signed(tb testing.TB, id string, fill byte, size int) (http.Header, []byte) {
	tb.Helper()
	body := []byte(`{"id":"` + id + `","pad":"` + strings.Repeat(string(fill), size) + `"}`)
	cfg, _ := verify.Preset("standard")
	header, err := verify.Sign(cfg, f.secret, id, time.Now(), body)
	if err != nil {
		tb.Fatal(err)
	}
	return header, body
}

// request is event 0's request, as Caddy would hand it to the handler.
func (f *requestPathFixture) request() *http.Request {
	return f.signedRequest(f.header.Clone(), f.body)
}

// signedRequest is a request of body with header, as Caddy would hand it to the handler.
func (f *requestPathFixture) signedRequest(header http.Header, body []byte) *http.Request {
	r := &http.Request{
		Method: http.MethodPost, URL: f.target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Host: f.target.Host, RemoteAddr: "127.0.0.1:40000", RequestURI: f.target.RequestURI(),
	}
	return r.WithContext(context.WithValue(context.Background(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
}

// serveSigned sends body with header, and checks the answer's status (0: the route's success).
func (f *requestPathFixture) serveSigned(tb testing.TB, header http.Header, body []byte, want int) {
	r := f.signedRequest(header, body)
	w := &discardWriter{header: make(http.Header)}
	if err := f.h.ServeHTTP(w, r, f.next); err != nil {
		tb.Error(err)
		return
	}
	if want == 0 {
		want = http.StatusOK
		if f.h.Forward != nil {
			want = http.StatusAccepted
		}
	}
	if w.status != want {
		tb.Errorf("status %d, want %d", w.status, want)
	}
}

// discardWriter is a ResponseWriter that keeps the status only.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *discardWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(b), nil
}
