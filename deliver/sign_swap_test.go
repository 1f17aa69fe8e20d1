package deliver

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
)

// Reloads that swap the Sign hook (resign on, off, another secret) while workers deliver lose
// and duplicate nothing, and every request carries the signature of exactly one hook in force
// (run under -race: the swap and the workers' reads of it do not race).
func TestConfigureSwapsSignWhileWorkersSign(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(_ int, _ http.ResponseWriter, r *http.Request) { sleepOrGone(r, time.Millisecond) })
	fake := newFakeOutbox()
	const events = 120
	for i := range events {
		fake.add(testEvent(fmt.Sprintf("evt_%03d", i), "{}"))
	}
	signWith := func(name string) func(*http.Request, *dedupe.Event) error {
		return func(req *http.Request, ev *dedupe.Event) error {
			req.Header.Set("X-Signature", name+":"+ev.ID)
			return nil
		}
	}
	configs := []Config{testConfig(t, up.URL), testConfig(t, up.URL), testConfig(t, up.URL)}
	configs[0].Sign, configs[1].Sign = signWith("a"), signWith("b") // configs[2]: resign off
	d := startDeliverer(t, fake, configs[0])
	for i := 0; fake.count(testNamespace, dedupe.Delivered) < events; i++ {
		if i > 2000 {
			t.Fatalf("only %d of %d delivered", fake.count(testNamespace, dedupe.Delivered), events)
		}
		d.Configure(configs[i%3])
		time.Sleep(2 * time.Millisecond)
	}
	seen := make(map[string]int)
	for _, r := range up.received() {
		id := r.Header.Get("Hookgate-Event-Id")
		seen[id]++
		if sig := r.Header.Values("X-Signature"); len(sig) > 1 || len(sig) == 1 && sig[0] != "a:"+id && sig[0] != "b:"+id {
			t.Errorf("%s carried signatures %q, want one hook's for it, or none", id, sig)
		}
	}
	for i := range events {
		if id := fmt.Sprintf("evt_%03d", i); seen[id] != 1 {
			t.Errorf("%s reached the upstream %d times, want exactly once", id, seen[id])
		}
	}
}
