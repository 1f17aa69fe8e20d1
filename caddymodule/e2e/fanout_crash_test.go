//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/internal/hooktest"
)

// fanOutCaddyfile is a route of three destinations on one upstream, told apart by path: legacy
// takes every event, billing the invoices, oncall the disputes; retries come quickly.
const fanOutCaddyfile = `{
	admin {$HOOKGATE_ADMIN}
}
http://localhost:{$HOOKGATE_PORT} {
	bind 127.0.0.1
	hookgate /hooks/orders* {
		preset standard
		name orders
		secret {env.STANDARD_WEBHOOK_SECRET}
		forward legacy http://127.0.0.1:{$HOOKGATE_FORWARD_PORT}/legacy {
			backoff 100ms 500ms
		}
		forward billing http://127.0.0.1:{$HOOKGATE_FORWARD_PORT}/billing {
			only json type invoice.*
			backoff 100ms 500ms
		}
		forward oncall http://127.0.0.1:{$HOOKGATE_FORWARD_PORT}/oncall {
			only json type charge.dispute.*
			backoff 100ms 500ms 1s
			max_attempts 1000
		}
	}
}
`

// fanOutUpstream counts, per destination (the path), the deliveries it answered 200; while
// oncallDown is set it answers the oncall destination 503.
type fanOutUpstream struct {
	mu         sync.Mutex
	delivered  map[string]map[string]int // path → event ID → 200s
	oncallDown atomic.Bool
}

// ServeHTTP tells the destinations by their URL's path prefix, before the request's own path.
func (u *fanOutUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	dest, _, _ := strings.Cut(r.URL.Path[1:], "/")
	dest = "/" + dest
	if dest == "/oncall" && u.oncallDown.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	u.mu.Lock()
	if u.delivered[dest] == nil {
		u.delivered[dest] = map[string]int{}
	}
	u.delivered[dest][r.Header.Get("Hookgate-Event-Id")]++
	u.mu.Unlock()
}

// count is how many times the destination at path got the event.
func (u *fanOutUpstream) count(path, id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.delivered[path][id]
}

// total is the destination's deliveries.
func (u *fanOutUpstream) total(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.delivered[path] {
		n += c
	}
	return n
}

// fanOutTypes are the event types sent in turn, and the destinations each one is for.
var fanOutTypes = []struct {
	typ   string
	takes map[string]bool
}{
	{"invoice.paid", map[string]bool{"/legacy": true, "/billing": true}},
	{"charge.dispute.created", map[string]bool{"/legacy": true, "/oncall": true}},
	{"customer.created", map[string]bool{"/legacy": true}},
}

// TestFanOutCrashesLoseNothingAndMixNothingUp: a route of three destinations, one of them
// refusing every event for the first half of the run, takes a load of signed events of three
// types while Caddy is killed with -9 three times. Every acknowledged event reaches every
// destination whose filter it matches and none whose filter it does not, and each
// destination's duplicates are within the crash bound.
func TestFanOutCrashesLoseNothingAndMixNothingUp(t *testing.T) {
	t.Parallel()
	const total, senders, kills, workers = 6000, 32, 3, 16
	up := &fanOutUpstream{delivered: map[string]map[string]int{}}
	up.oncallDown.Store(true)
	server := httptest.NewServer(up)
	t.Cleanup(server.Close)

	config := filepath.Join(t.TempDir(), "fanout.Caddyfile")
	if err := os.WriteFile(config, []byte(fanOutCaddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newBinaryGateway(t, config)
	g.env = append(g.env,
		"STANDARD_WEBHOOK_SECRET="+hooktest.Secret,
		fmt.Sprintf("HOOKGATE_FORWARD_PORT=%d", server.Listener.Addr().(*net.TCPAddr).Port),
	)
	g.start(t)
	url := fmt.Sprintf("http://localhost:%d/hooks/orders", g.port)

	var (
		next, ackCount atomic.Int64
		mu             sync.Mutex
		acked          = map[string]int{} // event ID → its type's index
		wg             sync.WaitGroup
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for range senders {
		wg.Go(func() {
			for i := next.Add(1); i <= total; i = next.Add(1) {
				kind := int(i) % len(fanOutTypes)
				id := fmt.Sprintf("evt_fan_%d", i)
				body := fmt.Sprintf(`{"type":%q,"data":{"object":{"id":"obj_%d"}}}`, fanOutTypes[kind].typ, i)
				ev := hooktest.SignedEvent(t, id, body, time.Now(), hooktest.Secret)
				for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					got, err := hooktest.TrySendTo(client, url, ev)
					if err == nil && (got.Status == http.StatusAccepted || got.Status == http.StatusOK) {
						mu.Lock()
						acked[id] = kind
						mu.Unlock()
						ackCount.Add(1)
						break
					}
				}
			}
		})
	}
	for k := 1; k <= kills; k++ {
		threshold := int64(k * total / (kills + 1))
		hooktest.WaitFor(t, fmt.Sprintf("%d acknowledged before kill %d", threshold, k), 60*time.Second, func() bool {
			return ackCount.Load() >= threshold
		})
		g.kill()
		if k == 2 {
			up.oncallDown.Store(false) // oncall comes back while the gateway is down
		}
		time.Sleep(200 * time.Millisecond)
		g.start(t)
	}
	wg.Wait()
	if len(acked) != total {
		t.Fatalf("%d of %d events acknowledged", len(acked), total)
	}

	hooktest.WaitFor(t, "every acknowledged event at every destination that takes it", 180*time.Second, func() bool {
		for id, kind := range acked {
			for path := range fanOutTypes[kind].takes {
				if up.count(path, id) == 0 {
					return false
				}
			}
		}
		return true
	})
	bound := deliver.UnrecordedPerWorker * workers * kills
	for _, path := range []string{"/legacy", "/billing", "/oncall"} {
		want := 0
		for id, kind := range acked {
			switch takes := fanOutTypes[kind].takes[path]; {
			case takes:
				want++
			case up.count(path, id) > 0:
				t.Errorf("%s reached %s, whose filter does not take %s", id, path, fanOutTypes[kind].typ)
			}
		}
		duplicates := up.total(path) - want
		t.Logf("%s: %d events, %d deliveries, %d duplicates (bound %d)", path, want, up.total(path), duplicates, bound)
		if duplicates > bound {
			t.Errorf("%s: %d duplicates, more than the %d that can be sent and unrecorded at %d kills", path, duplicates, bound, kills)
		}
	}
}
