package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// upstream is what every proxied or forwarded request lands on: the bench's in-process sink or,
// with -sink caddy, a second Caddy answering 200 (caddysink.go).
type upstream interface {
	addr() string
	// received brings the record of arrivals up to date and returns it.
	received() *arrivals
	// cpuTime is the CPU time of the upstream's own process so far (0 for the in-process sink,
	// whose CPU the client's column counts).
	cpuTime() time.Duration
	// connections is how many connections Caddy has opened to the upstream so far (-1: not counted).
	connections() int64
	close()
}

// sink is the default upstream: an in-process HTTP server on loopback that reads the body,
// answers 200 at once, and records when each event first arrived.
type sink struct {
	arrivals
	server   *http.Server
	listener net.Listener
	// down makes the sink an upstream that is down: it answers every request 503 with
	// Retry-After: 1 and records nothing.
	down atomic.Bool
	// opened counts the connections accepted: a proxy that keeps its connections alive opens
	// about as many as it has requests in flight, once.
	opened atomic.Int64
}

// startSink listens on a free loopback port and serves until close.
func startSink() (*sink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{listener: l}
	s.server = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ConnState: func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.opened.Add(1)
		}
	}}
	go func() { _ = s.server.Serve(l) }()
	return s, nil
}

// addr is the sink's host:port.
func (s *sink) addr() string { return s.listener.Addr().String() }

func (s *sink) received() *arrivals { return &s.arrivals }

func (s *sink) cpuTime() time.Duration { return 0 }

func (s *sink) connections() int64 { return s.opened.Load() }

// ServeHTTP drains the body, notes the event and answers 200 with an empty body (503 while down).
func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if s.down.Load() {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	id := r.Header.Get("Hookgate-Event-Id")
	if id == "" {
		id = r.Header.Get("Webhook-Id")
	}
	s.note(id, r.Header.Get("Hookgate-Attempt"), time.Now().UnixNano(), destinationIndex(r.URL.Path))
	w.WriteHeader(http.StatusOK)
}

// close stops the server.
func (s *sink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.server.Shutdown(ctx)
}

// startUpstream starts the upstream -sink names.
func startUpstream(o options) (upstream, error) {
	if o.sink == sinkCaddy {
		return startCaddySink(o.caddy)
	}
	return startSink()
}

// destinationIndex is the destination a request to the sink is for: the multi-destination configs
// forward to /a, /b and /c (destinationForwards); anything else is a route's only one.
func destinationIndex(path string) int {
	if len(path) >= 3 && path[0] == '/' && path[2] == '/' && path[1] >= 'a' && path[1] <= 'c' {
		return int(path[1] - 'a')
	}
	return 0
}

// waitDistinct waits until u has seen want distinct events or timeout passes, and says how long
// it waited.
func waitDistinct(u upstream, want int64, timeout time.Duration) time.Duration {
	start := time.Now()
	for u.received().distinct.Load() < want && time.Since(start) < timeout {
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// eventIDPrefix starts every bench event ID; a fixed-width sequence number follows.
const (
	eventIDPrefix = "evt_"
	eventIDDigits = 16
)

// eventID formats sequence number seq as a bench event ID.
func eventID(seq uint64) string {
	digits := strconv.FormatUint(seq, 10)
	return eventIDPrefix + strings.Repeat("0", max(eventIDDigits-len(digits), 0)) + digits
}

// parseEventID is eventID's inverse.
func parseEventID(id string) (uint64, bool) {
	if !strings.HasPrefix(id, eventIDPrefix) {
		return 0, false
	}
	seq, err := strconv.ParseUint(id[len(eventIDPrefix):], 10, 64)
	return seq, err == nil
}
