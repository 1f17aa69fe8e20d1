package deliver

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// recordingObserver keeps what it is told: when each attempt started, and the states recorded.
type recordingObserver struct {
	mu     sync.Mutex
	starts []time.Time
	states map[dedupe.State]int
}

func (o *recordingObserver) Attempted(took time.Duration) {
	started := time.Now().Add(-took)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.starts = append(o.starts, started)
}

func (o *recordingObserver) Recorded(state dedupe.State) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.states == nil {
		o.states = make(map[dedupe.State]int)
	}
	o.states[state]++
}

// attemptStarts is when each attempt started, in the order the observer was told.
func (o *recordingObserver) attemptStarts() []time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.starts)
}

// One event fails once then is delivered, one is refused (dead), one is superseded unsent: the
// observer is told of three attempts and of each recorded state once.
func TestObserverToldOfEveryOutcome(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Hookgate-Event-Id") == "refused":
			w.WriteHeader(http.StatusBadRequest)
		case n == 1: // the first request (the flaky event's only: the refused one is sent after)
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	fake := newFakeOutbox()
	fake.setDelivered(testNamespace, "cus_1", 5)
	flaky := testEvent("flaky", "{}")
	fake.add(flaky)
	cfg := testConfig(t, up.URL)
	cfg.Workers = 1
	obs := &recordingObserver{states: map[dedupe.State]int{}}
	cfg.Observer = obs
	d := startDeliverer(t, fake, cfg)
	waitFor(t, 5*time.Second, "the flaky event delivered", func() bool {
		return fake.event(testNamespace, "flaky").State == dedupe.Delivered
	})
	refused, older := testEvent("refused", "{}"), testEvent("older", "{}")
	older.Entity, older.Version = "cus_1", 3
	fake.add(refused)
	fake.add(older)
	d.Notify()
	waitFor(t, 5*time.Second, "every event final", func() bool {
		return fake.count(testNamespace, dedupe.Pending) == 0
	})
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := map[dedupe.State]int{dedupe.Pending: 1, dedupe.Delivered: 1, dedupe.Dead: 1, dedupe.Superseded: 1}
	if len(obs.starts) != 3 || len(obs.states) != len(want) {
		t.Fatalf("observed %d attempts and states %v; want 3 attempts and %v", len(obs.starts), obs.states, want)
	}
	for state, n := range want {
		if obs.states[state] != n {
			t.Errorf("observed %s %d times, want %d (all: %v)", state, obs.states[state], n, obs.states)
		}
	}
}
