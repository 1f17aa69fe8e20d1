package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sink is the upstream every proxied or forwarded request lands on: an in-process HTTP server on
// loopback that reads the body, answers 200 at once, and counts what it received.
type sink struct {
	server   *http.Server
	listener net.Listener

	requests atomic.Int64 // every request, duplicates included
	distinct atomic.Int64 // distinct bench event IDs (Hookgate-Event-Id, else Webhook-Id)
	retries  atomic.Int64 // requests carrying Hookgate-Attempt > 1

	mu   sync.Mutex
	seen []uint64 // bitset over event sequence numbers
}

// startSink listens on a free loopback port and serves until close.
func startSink() (*sink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{listener: l}
	s.server = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.server.Serve(l) }()
	return s, nil
}

// addr is the sink's host:port.
func (s *sink) addr() string { return s.listener.Addr().String() }

// ServeHTTP drains the body, notes the event and answers 200 with an empty body.
func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.requests.Add(1)
	id := r.Header.Get("Hookgate-Event-Id")
	if id == "" {
		id = r.Header.Get("Webhook-Id")
	}
	if seq, ok := parseEventID(id); ok && s.markSeen(seq) {
		s.distinct.Add(1)
	}
	if attempt, _ := strconv.Atoi(r.Header.Get("Hookgate-Attempt")); attempt > 1 {
		s.retries.Add(1)
	}
	w.WriteHeader(http.StatusOK)
}

// markSeen records seq and reports whether it is new.
func (s *sink) markSeen(seq uint64) bool {
	word, bit := seq/64, uint64(1)<<(seq%64)
	s.mu.Lock()
	defer s.mu.Unlock()
	for uint64(len(s.seen)) <= word {
		s.seen = append(s.seen, make([]uint64, max(len(s.seen), 1024))...)
	}
	if s.seen[word]&bit != 0 {
		return false
	}
	s.seen[word] |= bit
	return true
}

// waitDistinct waits until the sink has seen want distinct events or timeout passes, and says
// how long it waited.
func (s *sink) waitDistinct(want int64, timeout time.Duration) time.Duration {
	start := time.Now()
	for s.distinct.Load() < want && time.Since(start) < timeout {
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// close stops the server.
func (s *sink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.server.Shutdown(ctx)
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
