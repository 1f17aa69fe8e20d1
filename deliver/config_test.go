package deliver

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWithDefaultsFillsZeroFields(t *testing.T) {
	got := Config{}.WithDefaults()
	want := Config{
		MaxAttempts: 8, Timeout: 30 * time.Second, Workers: 16, Jitter: "proportional",
		RetryAfterCap: time.Hour, PauseAfter: 5, Keep: 24 * time.Hour, DeadKeep: 720 * time.Hour, MaxPending: 100000,
	}
	if got.MaxAttempts != want.MaxAttempts || got.Timeout != want.Timeout || got.Workers != want.Workers ||
		got.Jitter != want.Jitter || got.RetryAfterCap != want.RetryAfterCap || got.PauseAfter != want.PauseAfter ||
		got.Keep != want.Keep || got.DeadKeep != want.DeadKeep || got.MaxPending != want.MaxPending {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
	wantSchedule := []time.Duration{10 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, 2 * time.Hour}
	if !slices.Equal(got.Schedule, wantSchedule) {
		t.Errorf("default schedule = %v, want %v", got.Schedule, wantSchedule)
	}
	got.Schedule[0] = time.Nanosecond
	if DefaultSchedule[0] != 10*time.Second {
		t.Error("WithDefaults shares DefaultSchedule's array: changing a config changed the default")
	}
}

func TestWithDefaultsKeepsSetFields(t *testing.T) {
	cfg := Config{MaxAttempts: 3, Timeout: time.Second, Workers: 2, Schedule: []time.Duration{time.Millisecond},
		Jitter: "none", RetryAfterCap: time.Minute, PauseAfter: 9, Keep: time.Hour, DeadKeep: 2 * time.Hour}
	got := cfg.WithDefaults()
	if got.MaxAttempts != 3 || got.Timeout != time.Second || got.Workers != 2 || got.Jitter != "none" ||
		got.RetryAfterCap != time.Minute || got.PauseAfter != 9 || got.Keep != time.Hour || got.DeadKeep != 2*time.Hour ||
		!slices.Equal(got.Schedule, cfg.Schedule) {
		t.Errorf("WithDefaults changed set fields: %+v", got)
	}
}

func TestValidate(t *testing.T) {
	target := func(raw string) *url.URL {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	tests := []struct {
		name    string
		cfg     Config
		problem string // "" means valid
	}{
		{"defaults with a target", Config{Target: target("http://127.0.0.1:3000")}, ""},
		{"https with a path prefix", Config{Target: target("https://app.internal/base")}, ""},
		{"no target", Config{}, "target is required"},
		{"other scheme", Config{Target: target("ftp://host")}, "scheme must be http or https"},
		{"relative target", Config{Target: target("/hooks")}, "scheme must be http or https"},
		{"no host", Config{Target: target("http:///x")}, "host is missing"},
		{"query", Config{Target: target("http://h/?a=1")}, "only scheme, host and an optional path"},
		{"fragment", Config{Target: target("http://h/#f")}, "only scheme, host and an optional path"},
		{"negative attempts", Config{Target: target("http://h"), MaxAttempts: -1}, "max_attempts must be positive"},
		{"negative timeout", Config{Target: target("http://h"), Timeout: -time.Second}, "timeout must be positive"},
		{"negative workers", Config{Target: target("http://h"), Workers: -2}, "workers must be positive"},
		{"negative pause", Config{Target: target("http://h"), PauseAfter: -1}, "pause_after must be positive"},
		{"negative keep", Config{Target: target("http://h"), Keep: -1}, "keep must be positive"},
		{"negative dead keep", Config{Target: target("http://h"), DeadKeep: -1}, "dead_ttl must be positive"},
		{"negative max pending", Config{Target: target("http://h"), MaxPending: -1}, "max_pending must be positive"},
		{"negative cap", Config{Target: target("http://h"), RetryAfterCap: -1}, "retry_after_cap must be positive"},
		{"zero schedule entry", Config{Target: target("http://h"), Schedule: []time.Duration{time.Second, 0}}, "backoff delay 2 must be positive"},
		{"unknown jitter", Config{Target: target("http://h"), Jitter: "some"}, `jitter must be "proportional", "full" or "none"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.problem == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.problem)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	err := Config{MaxAttempts: -1, Jitter: "x"}.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want errors")
	}
	for _, want := range []string{"target is required", "max_attempts", "jitter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q, missing %q", err, want)
		}
	}
}
