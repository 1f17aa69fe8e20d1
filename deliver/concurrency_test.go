package deliver

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

func TestWorkersBoundConcurrency(t *testing.T) {
	t.Parallel()
	up, release := newBlockingUpstream(t)
	fake := newFakeOutbox()
	for i := range 50 {
		fake.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	d := startDeliverer(t, fake, testConfig(t, up.URL)) // 4 workers

	waitFor(t, 5*time.Second, "4 requests in flight", func() bool { return up.count() == 4 })
	time.Sleep(200 * time.Millisecond) // room for a fifth, which must not come
	if n, peak, inFlight := up.count(), up.peakInFlight(), d.Status().InFlight; n != 4 || peak != 4 || inFlight != 4 {
		t.Errorf("with the upstream blocked: %d requests, peak %d in flight, status says %d; want 4, 4, 4", n, peak, inFlight)
	}
	close(release)
	waitFor(t, 5*time.Second, "all 50 delivered", func() bool { return fake.count(testNamespace, dedupe.Delivered) == 50 })
	if peak := up.peakInFlight(); peak > 4 {
		t.Errorf("peak %d requests in flight, want at most 4 workers", peak)
	}
	if n := up.count(); n != 50 {
		t.Errorf("upstream got %d requests for 50 events", n)
	}
}

func TestConfigureChangesTheWorkerCount(t *testing.T) {
	t.Parallel()
	up, release := newBlockingUpstream(t)
	fake := newFakeOutbox()
	for i := range 10 {
		fake.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	cfg := testConfig(t, up.URL)
	cfg.Workers = 1
	d := startDeliverer(t, fake, cfg)
	waitFor(t, 5*time.Second, "1 request in flight", func() bool { return up.count() == 1 })

	cfg.Workers = 3
	d.Configure(cfg)
	waitFor(t, 5*time.Second, "3 requests in flight after growing to 3 workers", func() bool { return up.count() == 3 })
	cfg.Workers = 2
	d.Configure(cfg)
	close(release)
	waitFor(t, 5*time.Second, "all 10 delivered", func() bool { return fake.count(testNamespace, dedupe.Delivered) == 10 })
	if n := up.count(); n != 10 {
		t.Errorf("upstream got %d requests for 10 events", n)
	}
}

func TestConfigureSwitchesTargetWithoutLossOrDuplicates(t *testing.T) {
	t.Parallel()
	slow := func(_ int, _ http.ResponseWriter, r *http.Request) { sleepOrGone(r, 10*time.Millisecond) }
	first, second := newUpstream(t, slow), newUpstream(t, slow)
	fake := newFakeOutbox()
	const events = 40
	for i := range events {
		fake.add(testEvent(fmt.Sprintf("evt_%02d", i), "{}"))
	}
	cfg := testConfig(t, first.URL)
	cfg.Workers = 2
	d := startDeliverer(t, fake, cfg)
	waitFor(t, 5*time.Second, "some deliveries to the first upstream", func() bool { return first.count() >= 5 })

	d.Configure(testConfig(t, second.URL))
	waitFor(t, 5*time.Second, "all delivered", func() bool { return fake.count(testNamespace, dedupe.Delivered) == events })

	seen := make(map[string]int)
	for _, up := range []*upstream{first, second} {
		for _, r := range up.received() {
			seen[r.Header.Get("Hookgate-Event-Id")]++
		}
	}
	for i := range events {
		if id := fmt.Sprintf("evt_%02d", i); seen[id] != 1 {
			t.Errorf("%s reached the upstreams %d times, want exactly once", id, seen[id])
		}
	}
	if first.count() == 0 || second.count() == 0 || first.count() == events {
		t.Errorf("first upstream got %d, second %d; want the switch in the middle", first.count(), second.count())
	}
}

func TestOneEntityIsNeverSentConcurrently(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) { sleepOrGone(r, 50*time.Millisecond) })
	fake := newFakeOutbox()
	for version := int64(1); version <= 6; version++ {
		ev := testEvent(fmt.Sprintf("v%d", version), "{}")
		ev.Entity, ev.Version = "cus_1", version
		fake.add(ev)
	}
	cfg := testConfig(t, up.URL)
	cfg.Workers = 8 // all six in one lease
	startDeliverer(t, fake, cfg)
	waitFor(t, 5*time.Second, "every version final", func() bool { return fake.count(testNamespace, dedupe.Pending) == 0 })

	reqs := up.received()
	if len(reqs) != 1 || reqs[0].Header.Get("Hookgate-Event-Id") != "v6" {
		var ids []string
		for _, r := range reqs {
			ids = append(ids, r.Header.Get("Hookgate-Event-Id"))
		}
		t.Errorf("upstream got %v, want only the newest version, v6", ids)
	}
	if n := fake.count(testNamespace, dedupe.Superseded); n != 5 {
		t.Errorf("%d events superseded, want the 5 older versions", n)
	}
}

func TestNewerVersionWaitsForTheOneInFlight(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) { sleepOrGone(r, 300*time.Millisecond) })
	fake := newFakeOutbox()
	v1 := testEvent("v1", "{}")
	v1.Entity, v1.Version = "cus_1", 1
	fake.add(v1)
	d := startDeliverer(t, fake, testConfig(t, up.URL))
	waitFor(t, 5*time.Second, "v1 in flight", func() bool { return up.count() == 1 })

	v2 := testEvent("v2", "{}")
	v2.Entity, v2.Version = "cus_1", 2
	fake.add(v2)
	d.Notify()
	waitFor(t, 5*time.Second, "both delivered", func() bool { return fake.count(testNamespace, dedupe.Delivered) == 2 })
	if peak := up.peakInFlight(); peak != 1 {
		t.Errorf("peak %d requests of one entity in flight, want 1", peak)
	}
	if reqs := up.received(); reqs[0].Header.Get("Hookgate-Event-Id") != "v1" || reqs[1].Header.Get("Hookgate-Event-Id") != "v2" {
		t.Errorf("upstream got %s then %s, want v1 then v2", reqs[0].Header.Get("Hookgate-Event-Id"), reqs[1].Header.Get("Hookgate-Event-Id"))
	}
	if h := fake.history("v2"); h[0].State != dedupe.Pending || h[0].Attempts != 0 {
		t.Errorf("v2's first update = %s after %d attempts, want postponed (pending), unattempted", h[0].State, h[0].Attempts)
	}
}
