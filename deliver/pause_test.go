package deliver

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
)

func TestUpstreamHealthPausesAndResumes(t *testing.T) {
	now := time.Now()
	var h upstreamHealth
	if free, _ := h.slots(4, 1, now); free != 3 {
		t.Errorf("healthy, 4 workers, 1 in flight: %d free, want 3", free)
	}
	for i := 1; i <= 2; i++ {
		if h.failed(3, now) {
			t.Fatalf("failure %d of 3 paused", i)
		}
	}
	if !h.failed(3, now.Add(time.Second)) || !h.paused {
		t.Fatal("third failure in a row did not pause")
	}
	if h.failed(3, now.Add(time.Second)) {
		t.Error("a fourth failure reported pausing again")
	}
	if free, probeIn := h.slots(4, 0, now); free != 0 || probeIn != time.Second {
		t.Errorf("paused before the probe time: %d free, probe in %v; want 0, 1s", free, probeIn)
	}
	if free, _ := h.slots(4, 1, now.Add(2*time.Second)); free != 0 {
		t.Errorf("paused with a probe in flight: %d free, want 0", free)
	}
	if free, _ := h.slots(4, 0, now.Add(2*time.Second)); free != 1 {
		t.Errorf("paused, probe due, nothing in flight: %d free, want 1", free)
	}
	if !h.succeeded() || h.paused || h.consecutiveFailures != 0 {
		t.Errorf("success: %+v, want resumed and counter reset", h)
	}
	if h.succeeded() {
		t.Error("a second success reported resuming again")
	}
}

func TestPausesWhileUpstreamIsDownThenResumes(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	up := newUpstream(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		sleepOrGone(r, 10*time.Millisecond)
		if down.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	fake := newFakeOutbox()
	const events = 30
	for i := range events {
		fake.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	cfg := testConfig(t, up.URL)
	cfg.Workers = 8
	cfg.PauseAfter = 3
	cfg.MaxAttempts = 10
	core, logs := observer.New(zap.InfoLevel)
	d := startDelivererWithLogger(t, fake, cfg, zap.New(core))

	waitFor(t, 5*time.Second, "the deliverer to pause", func() bool { return d.Status().Paused })
	// Attempts started before the pause may still be running; once they are done, only probes.
	waitFor(t, 5*time.Second, "the attempts started before the pause to finish", func() bool { return d.Status().InFlight == 0 })
	up.resetPeak()
	before := up.count()
	time.Sleep(500 * time.Millisecond)
	during := up.count() - before
	t.Logf("paused for 500ms: %d attempts; %d before", during, before)
	if peak := up.peakInFlight(); peak > 1 {
		t.Errorf("while paused, %d requests were in flight at once, want 1 probe at a time", peak)
	}
	// Unpaused, 8 workers would make about 8 × 500ms / 30ms ≈ 130 attempts; probes wait out each
	// failed probe's 20ms or 40ms backoff after a 10ms attempt.
	if during > 25 {
		t.Errorf("while paused for 500ms, %d attempts were made, want at most about one per 30ms", during)
	}
	if status := d.Status(); !status.Paused || status.ConsecutiveFailures < 3 {
		t.Errorf("status while down = %+v, want paused with at least 3 failures", status)
	}
	if total := up.count(); total > 60 {
		t.Errorf("%d attempts while down, want far below %d events × %d attempts", total, events, cfg.MaxAttempts)
	}

	down.Store(false)
	waitFor(t, 5*time.Second, "all delivered once the upstream recovers", func() bool {
		return fake.count(testNamespace, dedupe.Delivered) == events
	})
	if status := d.Status(); status.Paused || status.ConsecutiveFailures != 0 {
		t.Errorf("status after recovery = %+v, want not paused, no failures", status)
	}
	if n := logs.FilterMessageSnippet("upstream paused").Len(); n != 1 {
		t.Errorf("logged the pause %d times, want once", n)
	}
	if n := logs.FilterMessageSnippet("delivery resumed").Len(); n != 1 {
		t.Errorf("logged the resumption %d times, want once", n)
	}
}
