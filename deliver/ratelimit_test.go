package deliver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookgate/hookgate/dedupe"
)

// busiestWindow is the most instants (requests' arrivals, attempts' starts) within any window of
// length per.
func busiestWindow(at []time.Time, per time.Duration) int {
	at = slices.SortedFunc(slices.Values(at), time.Time.Compare)
	most := 0
	for first := range at {
		n := 0
		for _, t := range at[first:] {
			if t.Sub(at[first]) >= per {
				break
			}
			n++
		}
		most = max(most, n)
	}
	return most
}

// arrivals is when each request reached the upstream.
func arrivals(requests []receivedRequest) []time.Time {
	at := make([]time.Time, len(requests))
	for i, r := range requests {
		at[i] = r.At
	}
	return at
}

// expectWithinRate fails the test if any window of the rate's length held more than its
// starts, +1 at the window's edge; it returns the most a window held.
func expectWithinRate(t *testing.T, at []time.Time, rate Rate) int {
	t.Helper()
	busiest := busiestWindow(at, rate.Per)
	if busiest > rate.Starts+1 {
		t.Errorf("a window of %v held %d attempts, want at most %d under rate %d per %v", rate.Per, busiest, rate.Starts+1, rate.Starts, rate.Per)
	}
	return busiest
}

// A backlog drained under `rate 10/s` starts no more than 10 attempts in any second (+1 at the
// window's edge), however many workers are free, and every event arrives. The starts are timed
// where the deliverer makes them: the limiter spaces them with no room to spare at the window's
// edge, so their arrivals, which a loaded machine delays by different amounts, can crowd one.
// At 10/s a start may come up to 100 ms after its permit and still keep the bound.
func TestRateLimitSpreadsABacklogOverTime(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	cfg.Workers = 16
	cfg.Rate = Rate{Starts: 10, Per: time.Second}
	obs := new(recordingObserver)
	cfg.Observer = obs
	out := newFakeOutbox()
	const events = 100
	for i := range events {
		out.add(testEvent(fmt.Sprintf("evt_%03d", i), "{}"))
	}
	began := time.Now()
	startDeliverer(t, out, cfg)

	waitFor(t, 60*time.Second, "all delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	took := time.Since(began)
	got := up.received()
	busiest := expectWithinRate(t, obs.attemptStarts(), cfg.Rate)
	t.Logf("%d events delivered in %v; busiest second held %d starts (%d arrivals)",
		len(got), took.Round(time.Millisecond), busiest, busiestWindow(arrivals(got), cfg.Rate.Per))
	if len(got) != events {
		t.Errorf("upstream got %d requests for %d events", len(got), events)
	}
	if took < 9*time.Second {
		t.Errorf("100 events at 10/s were all delivered in %v, which the limit cannot allow", took)
	}
}

// Retries and a paused upstream's probes are attempts like any other: an upstream that fails
// for a while (so events retry at once and the upstream pauses, probed as soon as each retry
// is due) still gets no more than the rate.
func TestRateLimitCountsRetriesAndProbes(t *testing.T) {
	t.Parallel()
	const failing = 60
	up := newUpstream(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= failing {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	cfg := testConfig(t, up.URL)
	cfg.Workers = 8
	cfg.MaxAttempts = 100
	cfg.PauseAfter = 5
	cfg.Schedule = []time.Duration{5 * time.Millisecond}
	cfg.Rate = Rate{Starts: 20, Per: time.Second}
	out := newFakeOutbox()
	const events = 40
	for i := range events {
		out.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	startDeliverer(t, out, cfg)

	waitFor(t, 60*time.Second, "all delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	got := up.received()
	busiest := expectWithinRate(t, arrivals(got), cfg.Rate)
	t.Logf("%d attempts for %d events; busiest second held %d", len(got), events, busiest)
	if len(got) != events+failing {
		t.Errorf("upstream got %d requests, want %d: one per event plus the %d that failed", len(got), events+failing, failing)
	}
}

// A rate is N/s or N/m, N a positive whole number; anything else is refused with the form
// it takes.
func TestParseRate(t *testing.T) {
	t.Parallel()
	good := map[string]Rate{
		"20/s":  {Starts: 20, Per: time.Second},
		"1/m":   {Starts: 1, Per: time.Minute},
		"300/m": {Starts: 300, Per: time.Minute},
	}
	for in, want := range good {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("Rate %+v writes as %q, want %q", got, got.String(), in)
		}
	}
	for _, in := range []string{"0/s", "-5/s", "20", "20/h", "20/ms", "/s", "2.5/s", "20/", "x/s", "2000000/s"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) was accepted", in)
		} else if !strings.Contains(err.Error(), "rate") {
			t.Errorf("ParseRate(%q): %v does not say it is about the rate", in, err)
		}
	}
}

// The time a backlog needs is the backlog over the rate; without a rate nothing is said.
func TestRateDrain(t *testing.T) {
	t.Parallel()
	if got := (Rate{Starts: 20, Per: time.Second}).Drain(200); got != 10*time.Second {
		t.Errorf("200 events at 20/s drain in %v, want 10s", got)
	}
	if got := (Rate{Starts: 30, Per: time.Minute}).Drain(45); got != 90*time.Second {
		t.Errorf("45 events at 30/m drain in %v, want 1m30s", got)
	}
	if got := (Rate{Starts: 1, Per: time.Minute}).Drain(200_000_000); got <= 0 {
		t.Errorf("200 million events at 1/m drain in %v, want a positive (saturated) time", got)
	}
	if got := (Rate{}).Drain(1000); got != 0 {
		t.Errorf("no rate drains in %v, want 0 (unknown)", got)
	}
}

// Events waiting for the rate are not leased so far ahead that their leases lapse: only what
// the rate lets start within the leases' spare time is leased, so each event is leased about
// once (each lapse costs a Lease, a synced write, and delays the event by a whole lease).
func TestRateLimitDoesNotLetWaitingLeasesLapse(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	const workers, events = 4, 40
	cfg.Workers = workers
	cfg.Rate = Rate{Starts: 8, Per: time.Second}
	out := &usableLeaseOutbox{fakeOutbox: newFakeOutbox(), timeout: cfg.Timeout, usable: 600 * time.Millisecond}
	for i := range events {
		out.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	startDelivererWithLogger(t, out, cfg, nil)

	waitFor(t, 30*time.Second, "all delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	leases := leasesTaken(out.fakeOutbox, events)
	// Before the first Lease answers, nothing tells how long a lease lasts: of the first events
	// leased ahead (2×workers), those that wait past 600 ms for the rate lapse once.
	t.Logf("%d events leased %d times in all", events, leases)
	if most := events + 2*workers; leases > most {
		t.Errorf("%d events were leased %d times in all, want at most %d", events, leases, most)
	}
	if n := up.count(); n != events {
		t.Errorf("upstream got %d requests for %d events", n, events)
	}
}

// A reload that raises the rate takes effect at once: events held by `1/m` go at the new rate,
// not after the old minute.
func TestRateLimitRaisedByAReloadAppliesAtOnce(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	cfg.Rate = Rate{Starts: 1, Per: time.Minute}
	out := newFakeOutbox()
	const events = 10
	for i := range events {
		out.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	d := startDeliverer(t, out, cfg)
	waitFor(t, 10*time.Second, "the first event delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == 1 })

	cfg.Rate = Rate{Starts: 20, Per: time.Second}
	d.Configure(cfg)
	waitFor(t, 20*time.Second, "the rest delivered at the new rate", func() bool {
		return out.count(testNamespace, dedupe.Delivered) == events
	})
	if n := up.count(); n != events {
		t.Errorf("upstream got %d requests for %d events", n, events)
	}
}

// failingStarts is an outbox whose shared rate limit fails its first calls (a Redis that is
// down or refuses the script), then works.
type failingStarts struct {
	*fakeOutbox
	mu       sync.Mutex
	failures int
	local    localStarts
}

func (f *failingStarts) TakeStart(ctx context.Context, ns string, interval, ahead time.Duration) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures > 0 {
		f.failures--
		return 0, errors.New("rate store unavailable")
	}
	return f.local.TakeStart(ctx, ns, interval, ahead)
}

func (f *failingStarts) failing() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failures
}

// A rate limit whose store fails is logged when it fails and when it works again, not at every
// retry, and the events then go.
func TestRateLimitStoreFailingIsLoggedOnceUntilItWorks(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	cfg.Rate = Rate{Starts: 20, Per: time.Second}
	out := &failingStarts{fakeOutbox: newFakeOutbox(), failures: 4}
	const events = 5
	for i := range events {
		out.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	core, logs := observer.New(zap.InfoLevel)
	startDelivererWithLogger(t, out, cfg, zap.New(core))

	waitFor(t, 30*time.Second, "all delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	if n := out.failing(); n != 0 {
		t.Fatalf("%d failures of the rate store left unused", n)
	}
	failed := logs.FilterMessageSnippet("taking a start of the delivery rate failed").Len()
	again := logs.FilterMessageSnippet("taking a start of the delivery rate works again").Len()
	if failed != 1 || again != 1 {
		t.Errorf("4 failures in a row of the rate store logged %d failures and %d recoveries, want 1 and 1", failed, again)
	}
}

// slowVersions is an outbox whose first reads of an entity's delivered version are slow (a
// Redis stalled by an fsync), then fast.
type slowVersions struct {
	*fakeOutbox
	slow  atomic.Int32
	delay time.Duration
}

func (s *slowVersions) DeliveredVersion(ctx context.Context, namespace, entity string) (int64, bool, error) {
	if s.slow.Add(-1) >= 0 {
		time.Sleep(s.delay)
	}
	return s.fakeOutbox.DeliveredVersion(ctx, namespace, entity)
}

// Events of entities read their entity's delivered version after their start was taken: when
// those reads are slow for a while and then fast, the attempts held up by them and those that
// follow still keep to the rate. The starts are timed where the deliverer makes them, as in
// TestRateLimitSpreadsABacklogOverTime: arrivals, which a loaded machine delays by different
// amounts, can crowd a window that the starts kept to.
func TestRateLimitHoldsWhenEntityChecksAreSlow(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	cfg.Workers = 16
	cfg.Rate = Rate{Starts: 20, Per: time.Second}
	obs := new(recordingObserver)
	cfg.Observer = obs
	out := &slowVersions{fakeOutbox: newFakeOutbox(), delay: 500 * time.Millisecond}
	out.slow.Store(10)
	const events = 40
	for i := range events {
		ev := testEvent(fmt.Sprintf("evt_%02d", i), "{}")
		ev.Entity, ev.Version = fmt.Sprintf("cus_%02d", i), 1
		out.add(ev)
	}
	startDelivererWithLogger(t, out, cfg, nil)

	waitFor(t, 30*time.Second, "all delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	got := up.received()
	busiest := expectWithinRate(t, obs.attemptStarts(), cfg.Rate)
	t.Logf("%d events of entities delivered; busiest second held %d starts (%d arrivals)", len(got), busiest, busiestWindow(arrivals(got), cfg.Rate.Per))
	if len(got) != events {
		t.Errorf("upstream got %d requests for %d events", len(got), events)
	}
}

// slowStarts is an outbox that keeps the rate limit in a store answering after a delay (a
// Redis across a network, or fsyncing every write); nodes sharing a limiter share the rate.
type slowStarts struct {
	*fakeOutbox
	limiter *localStarts
	delay   time.Duration
}

func (s *slowStarts) TakeStart(ctx context.Context, ns string, interval, ahead time.Duration) (time.Duration, error) {
	time.Sleep(s.delay / 2) // the store takes it halfway through the round trip
	wait, err := s.limiter.TakeStart(ctx, ns, interval, ahead)
	time.Sleep(s.delay - s.delay/2)
	return wait, err
}

// A rate store that answers more slowly than the rate's interval (20 ms at 100/s) still lets
// the events go, within the rate: a start is not thrown away for arriving after its interval.
func TestRateLimitOnAStoreSlowerThanTheIntervalStillDelivers(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	cfg.Workers = 16
	cfg.Rate = Rate{Starts: 100, Per: time.Second}
	out := &slowStarts{fakeOutbox: newFakeOutbox(), limiter: &localStarts{}, delay: 20 * time.Millisecond}
	const events = 150
	for i := range events {
		out.add(testEvent(fmt.Sprintf("evt_%03d", i), "{}"))
	}
	startDelivererWithLogger(t, out, cfg, nil)

	waitFor(t, 30*time.Second, "all delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	got := up.received()
	busiest := expectWithinRate(t, arrivals(got), cfg.Rate)
	t.Logf("%d events delivered; busiest second held %d attempts", len(got), busiest)
	if len(got) != events {
		t.Errorf("upstream got %d requests for %d events", len(got), events)
	}
}

// A shared rate store slower to answer than the rate's interval (60 ms at 20/s, a loaded Redis
// fsyncing every write) keeps the window bound while the next start is reserved ahead, and
// every event arrives. The pace it keeps is BenchmarkRateLimitThroughASlowStore's to measure.
func TestRateLimitOnAStoreSlowerThanTheIntervalKeepsTheBound(t *testing.T) {
	t.Parallel()
	got, took, wasted := drainThroughASlowStore(t, 200)
	busiest := expectWithinRate(t, arrivals(got), slowStoreRate)
	t.Logf("%d events delivered in %v; busiest second held %d attempts; %d starts wasted", len(got), took.Round(time.Millisecond), busiest, wasted)
	if len(got) != 200 {
		t.Errorf("upstream got %d requests for 200 events", len(got))
	}
}

// BenchmarkRateLimitThroughASlowStore reports the pace a route keeps at 20/s through a rate
// store answering in 60 ms, slower than the interval: 20 events/s when starts are reserved
// ahead, about 16 when each start costs a round trip; and the starts reserved and never used.
func BenchmarkRateLimitThroughASlowStore(b *testing.B) {
	const events = 100
	for b.Loop() {
		got, took, wasted := drainThroughASlowStore(b, events)
		b.ReportMetric(float64(len(got))/took.Seconds(), "events/s")
		b.ReportMetric(float64(wasted)/events, "wasted/event")
	}
}

// slowStoreRate is the rate of drainThroughASlowStore.
var slowStoreRate = Rate{Starts: 20, Per: time.Second}

// drainThroughASlowStore delivers events at slowStoreRate through a rate store answering in
// 60 ms, and returns what the upstream got, how long it took, and the starts wasted.
func drainThroughASlowStore(tb testing.TB, events int) (got []receivedRequest, took time.Duration, wasted int) {
	tb.Helper()
	up := newUpstream(tb, ok)
	cfg := testConfig(tb, up.URL)
	cfg.Workers = 16
	cfg.Rate = slowStoreRate
	out := &slowStarts{fakeOutbox: newFakeOutbox(), limiter: &localStarts{}, delay: 60 * time.Millisecond}
	for i := range events {
		out.add(testEvent(fmt.Sprintf("evt_%03d", i), "{}"))
	}
	began := time.Now()
	d := New(out, testNamespace, cfg, nil)
	d.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Stop(ctx); err != nil {
			tb.Errorf("stop: %v", err)
		}
	}()
	waitFor(tb, 60*time.Second, "all delivered", func() bool { return out.count(testNamespace, dedupe.Delivered) == events })
	took = time.Since(began)
	d.mu.Lock()
	wasted = d.reserved.wasted
	d.mu.Unlock()
	return up.received(), took, wasted
}

// A reload lowering a shared rate (20/s to 1/m on three nodes, answered by the store in 5, 40
// and 80 ms) bounds the starts from the reload on by the new rate: the starts the
// nodes reserved ahead under the old one are not used after it.
func TestRateLimitLoweredByAReloadHoldsTheNewBoundAcrossNodes(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, ok)
	cfg := testConfig(t, up.URL)
	cfg.Workers = 4
	cfg.Rate = Rate{Starts: 20, Per: time.Second}
	out := newFakeOutbox()
	for i := range 400 {
		out.add(testEvent(fmt.Sprintf("evt_%03d", i), "{}"))
	}
	shared := new(localStarts)
	nodes := []*Deliverer{
		startDelivererWithLogger(t, &slowStarts{fakeOutbox: out, limiter: shared, delay: 5 * time.Millisecond}, cfg, nil),
		startDelivererWithLogger(t, &slowStarts{fakeOutbox: out, limiter: shared, delay: 40 * time.Millisecond}, cfg, nil),
		startDelivererWithLogger(t, &slowStarts{fakeOutbox: out, limiter: shared, delay: 80 * time.Millisecond}, cfg, nil),
	}
	waitFor(t, 10*time.Second, "every node holding a start reserved ahead", func() bool {
		held := 0
		for _, d := range nodes {
			d.mu.Lock()
			n := len(d.reserved.held)
			d.mu.Unlock()
			if n == 0 {
				return false
			}
			held += n
		}
		return held >= 4
	})

	lowered := Rate{Starts: 1, Per: time.Minute}
	cfg.Rate = lowered
	for _, d := range nodes {
		d.Configure(cfg)
	}
	reloaded := time.Now()
	waitFor(t, 10*time.Second, "every node waiting for a start of the new rate, none sending", func() bool {
		for _, d := range nodes {
			d.mu.Lock()
			r := &d.reserved
			waiting := r.asking == 0 && d.attempting == 0 && d.recording == 0 &&
				(len(r.held) == 0 || r.held[0].at.After(time.Now().Add(lowered.Per/2)))
			d.mu.Unlock()
			if !waiting {
				return false
			}
		}
		return true
	})
	var after int
	for _, r := range up.received() {
		if r.At.After(reloaded) {
			after++
		}
	}
	t.Logf("%d attempts since the reload", after)
	if after > lowered.Starts+1 {
		t.Errorf("the upstream got %d attempts in the %v since a reload to %v; want at most %d", after, time.Since(reloaded).Round(time.Millisecond), lowered, lowered.Starts+1)
	}
}
