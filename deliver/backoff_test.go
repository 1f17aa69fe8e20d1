package deliver

import (
	"net/http"
	"testing"
	"time"
)

func TestScheduledDelayRepeatsTheLast(t *testing.T) {
	schedule := []time.Duration{10 * time.Second, 30 * time.Second, 2 * time.Minute}
	for attempts, want := range map[int]time.Duration{
		1: 10 * time.Second, 2: 30 * time.Second, 3: 2 * time.Minute, 4: 2 * time.Minute, 50: 2 * time.Minute,
	} {
		if got := scheduledDelay(schedule, attempts); got != want {
			t.Errorf("scheduledDelay(after attempt %d) = %v, want %v", attempts, got, want)
		}
	}
}

func TestJitterStaysInItsRange(t *testing.T) {
	const delay = 100 * time.Second
	tests := []struct {
		mode     string
		min, max time.Duration
	}{
		{JitterProportional, 75 * time.Second, 125 * time.Second},
		{JitterFull, 0, delay},
		{JitterNone, delay, delay},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			seen := make(map[time.Duration]bool)
			for range 10000 {
				got := withJitter(delay, tt.mode)
				if got < tt.min || got > tt.max {
					t.Fatalf("withJitter(%v, %q) = %v, want within [%v, %v]", delay, tt.mode, got, tt.min, tt.max)
				}
				seen[got] = true
			}
			if tt.mode != JitterNone && len(seen) < 100 {
				t.Errorf("withJitter(%v, %q) gave only %d distinct delays in 10000 draws", delay, tt.mode, len(seen))
			}
		})
	}
	if got := withJitter(0, JitterProportional); got != 0 {
		t.Errorf("withJitter(0) = %v, want 0", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		value string
		delay time.Duration
		ok    bool
	}{
		{"120", 2 * time.Minute, true},
		{" 0 ", 0, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"Mon, 02 Jan 2006 15:04:05 GMT", 0, true}, // long past
		{"99999999999999999999", longestDelay, true},
		{"", 0, false},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		delay, ok := parseRetryAfter(tt.value, now)
		if delay != tt.delay || ok != tt.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, delay, ok, tt.delay, tt.ok)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	cfg := Config{Schedule: []time.Duration{time.Second, time.Minute}, Jitter: JitterNone, RetryAfterCap: time.Hour}
	if got := retryDelay(cfg, 1, 0, false); got != time.Second {
		t.Errorf("after attempt 1 = %v, want the schedule's 1s", got)
	}
	if got := retryDelay(cfg, 7, 0, false); got != time.Minute {
		t.Errorf("after attempt 7 = %v, want the schedule's last, 1m", got)
	}
	if got := retryDelay(cfg, 2, 5*time.Second, true); got != 5*time.Second {
		t.Errorf("with Retry-After 5s = %v, want 5s (it replaces the schedule)", got)
	}
	if got := retryDelay(cfg, 1, 3*time.Hour, true); got != time.Hour {
		t.Errorf("with Retry-After 3h = %v, want the 1h cap", got)
	}
}
