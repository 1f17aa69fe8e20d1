package main

import (
	"testing"
	"time"
)

// The sink Caddy's access log lines, as Caddy 2.11 writes them with sinkHandlers, give each
// event's first arrival time, and redeliveries count once.
func TestSinkCaddyLogLinesRecordFirstArrivals(t *testing.T) {
	s := &caddySink{}
	for _, line := range []string{
		`{"level":"info","ts":1796174061.8517978,"logger":"http.log.access.log0","msg":"handled request","bytes_read":0,"user_id":"","duration":0.00014803,"size":0,"status":200,"hg_attempt":"","hg_webhook":"evt_0000000000000005","hg_event":""}`,
		`{"level":"info","ts":1796174061.8742495,"logger":"http.log.access.log0","msg":"handled request","bytes_read":0,"user_id":"","duration":0.000166217,"size":0,"status":200,"hg_attempt":"2","hg_webhook":"evt_0000000000000005","hg_event":"evt_0000000000000007"}`,
		`{"level":"info","ts":1796174062.5,"logger":"http.log.access.log0","msg":"handled request","hg_attempt":"2","hg_webhook":"","hg_event":"evt_0000000000000005"}`,
	} {
		s.noteLine([]byte(line))
	}
	if got := s.distinct.Load(); got != 2 {
		t.Errorf("distinct events: got %d, want 2 (5 and 7)", got)
	}
	if got := s.retries.Load(); got != 2 {
		t.Errorf("redeliveries: got %d, want 2", got)
	}
	start := time.Unix(1796174061, 0)
	d := s.deliveryOf([]uint64{5, 7}, start)
	if d.arrived != 2 || d.last.Seconds() < 0.874 || d.last.Seconds() > 0.875 {
		t.Errorf("delivery of 5 and 7: got %d arrived, the last after %v; want 2, after 874 ms (7's first arrival)", d.arrived, d.last)
	}
}

// An event acknowledged in the window that never arrived leaves the delivered rate unknown
// rather than flattering it.
func TestDeliveryWithAMissingEventHasNoRate(t *testing.T) {
	var a arrivals
	start := time.Now()
	a.note(eventID(1), "", start.Add(time.Second).UnixNano(), 0)
	if d := a.deliveryOf([]uint64{1, 2}, start); d.rate() != 0 || d.arrived != 1 {
		t.Errorf("got %d arrived, rate %.0f; want 1 arrived and no rate", d.arrived, d.rate())
	}
	if d := a.deliveryOf([]uint64{1}, start); d.rate() < 0.99 || d.rate() > 1.01 {
		t.Errorf("one event delivered 1 s after the window's start: got %.2f/s, want 1/s", d.rate())
	}
}

// With several destinations an event counts as delivered when the last of them has it, and the
// sink tells the destinations apart by the first segment of the path they forward to.
func TestAnEventOfSeveralDestinationsArrivesWithTheLast(t *testing.T) {
	var a arrivals
	a.expect(2)
	start := time.Now()
	a.note(eventID(1), "", start.Add(time.Second).UnixNano(), destinationIndex("/a/hooks/bench"))
	a.note(eventID(1), "2", start.Add(2*time.Second).UnixNano(), destinationIndex("/a/hooks/bench"))
	if a.distinct.Load() != 0 {
		t.Fatal("an event at one of its two destinations counted as delivered")
	}
	a.note(eventID(1), "", start.Add(3*time.Second).UnixNano(), destinationIndex("/b/hooks/bench"))
	if d := a.deliveryOf([]uint64{1}, start); a.distinct.Load() != 1 || d.arrived != 1 || d.last != 3*time.Second {
		t.Fatalf("distinct %d, delivery %+v; want it delivered when b had it", a.distinct.Load(), d)
	}
	if destinationIndex("/hooks/bench") != 0 || destinationIndex("/c/x") != 2 {
		t.Fatal("destinationIndex")
	}
}
