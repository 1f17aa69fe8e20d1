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
// takes every event, billing the invoices, oncall the disputes; retries come quickly, and a
// short timeout makes a short lease (the timeout and the deliverer's 30 s margin), so a killed
// node's leases lapse within the test. storage is the route's storage line ("" for Badger).
func fanOutCaddyfile(storage string) string {
	forward := func(name, only string) string {
		return fmt.Sprintf("\t\tforward %s http://127.0.0.1:{$HOOKGATE_FORWARD_PORT}/%s {\n%s\t\t\ttimeout 2s\n\t\t\tbackoff 100ms 500ms\n\t\t\tmax_attempts 1000\n\t\t}\n",
			name, name, only)
	}
	return "{\n\tadmin {$HOOKGATE_ADMIN}\n}\nhttp://localhost:{$HOOKGATE_PORT} {\n\tbind 127.0.0.1\n\thookgate /hooks/orders* {\n" +
		"\t\tpreset standard\n\t\tname orders\n\t\tsecret {env.STANDARD_WEBHOOK_SECRET}\n\t\t" + storage + "\n" +
		forward("legacy", "") +
		forward("billing", "\t\t\tonly json type invoice.*\n") +
		forward("oncall", "\t\t\tonly json type charge.dispute.*\n") +
		"\t}\n}\n"
}

// fanOutUpstream counts, per destination (the path's first segment), the deliveries it answered
// 200; while oncallDown is set it answers the oncall destination 503.
type fanOutUpstream struct {
	*httptest.Server
	mu         sync.Mutex
	delivered  map[string]map[string]int // "/destination" → event ID → 200s
	oncallDown atomic.Bool
}

func newFanOutUpstream(t *testing.T) *fanOutUpstream {
	u := &fanOutUpstream{delivered: map[string]map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *fanOutUpstream) serve(w http.ResponseWriter, r *http.Request) {
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

func (u *fanOutUpstream) port() int { return u.Listener.Addr().(*net.TCPAddr).Port }

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

// fanOutLoad sends total signed events of the three types from senders providers, each to the
// gateways in turn from its own, resending to the next on a connection error or a 503 until the
// event is acknowledged; acked maps each acknowledged event to its type.
type fanOutLoad struct {
	urls     []string
	ackCount atomic.Int64
	mu       sync.Mutex
	acked    map[string]int
	done     sync.WaitGroup
}

func startFanOutLoad(t *testing.T, name string, urls []string, total, senders int) *fanOutLoad {
	l := &fanOutLoad{urls: urls, acked: map[string]int{}}
	client := &http.Client{Timeout: 10 * time.Second}
	var next atomic.Int64
	for range senders {
		l.done.Go(func() {
			for i := next.Add(1); i <= int64(total); i = next.Add(1) {
				kind := int(i) % len(fanOutTypes)
				id := fmt.Sprintf("evt_%s_%d", name, i)
				body := fmt.Sprintf(`{"type":%q,"data":{"object":{"id":"obj_%d"}}}`, fanOutTypes[kind].typ, i)
				ev := hooktest.SignedEvent(t, id, body, time.Now(), hooktest.Secret)
				node := int(i) % len(urls)
				for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					got, err := hooktest.TrySendTo(client, urls[node], ev)
					if err == nil && (got.Status == http.StatusAccepted || got.Status == http.StatusOK) {
						l.mu.Lock()
						l.acked[id] = kind
						l.mu.Unlock()
						l.ackCount.Add(1)
						break
					}
					node = (node + 1) % len(urls)
				}
			}
		})
	}
	return l
}

// waitAcked waits until n events are acknowledged.
func (l *fanOutLoad) waitAcked(t *testing.T, n int64, what string) {
	t.Helper()
	hooktest.WaitFor(t, fmt.Sprintf("%d acknowledged %s", n, what), 90*time.Second, func() bool { return l.ackCount.Load() >= n })
}

// check waits until every acknowledged event reached every destination that takes it, and
// fails on one that reached a destination that does not take it, or on more duplicates at a
// destination than bound.
func (l *fanOutLoad) check(t *testing.T, up *fanOutUpstream, total, bound int) {
	t.Helper()
	l.done.Wait()
	if len(l.acked) != total {
		t.Fatalf("%d of %d events acknowledged", len(l.acked), total)
	}
	hooktest.WaitFor(t, "every acknowledged event at every destination that takes it", 180*time.Second, func() bool {
		for id, kind := range l.acked {
			for path := range fanOutTypes[kind].takes {
				if up.count(path, id) == 0 {
					return false
				}
			}
		}
		return true
	})
	for _, path := range []string{"/legacy", "/billing", "/oncall"} {
		want := 0
		for id, kind := range l.acked {
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
			t.Errorf("%s: %d duplicates, more than the %d that can be sent and unrecorded at the kills", path, duplicates, bound)
		}
	}
}

// fanOutGateway is the built binary running fanOutCaddyfile(storage) in front of up.
func fanOutGateway(t *testing.T, up *fanOutUpstream, storage string) *binaryGateway {
	config := filepath.Join(t.TempDir(), "fanout.Caddyfile")
	if err := os.WriteFile(config, []byte(fanOutCaddyfile(storage)), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newBinaryGateway(t, config)
	g.env = append(g.env, "STANDARD_WEBHOOK_SECRET="+hooktest.Secret, fmt.Sprintf("HOOKGATE_FORWARD_PORT=%d", up.port()))
	return g
}

// workersPerDestination is the forward blocks' workers (the default).
const workersPerDestination = 16

// TestFanOutCrashesLoseNothingAndMixNothingUp: a route of three destinations, one of them
// refusing every event for the first half of the run, takes a load of signed events of three
// types while Caddy is killed with -9 three times. Every acknowledged event reaches every
// destination whose filter it matches and none whose filter it does not, and each
// destination's duplicates are within the crash bound.
func TestFanOutCrashesLoseNothingAndMixNothingUp(t *testing.T) {
	t.Parallel()
	const total, senders, kills = 6000, 32, 3
	up := newFanOutUpstream(t)
	up.oncallDown.Store(true)
	g := fanOutGateway(t, up, "")
	g.start(t)
	load := startFanOutLoad(t, "fan", []string{fmt.Sprintf("http://localhost:%d/hooks/orders", g.port)}, total, senders)
	for k := 1; k <= kills; k++ {
		load.waitAcked(t, int64(k*total/(kills+1)), fmt.Sprintf("before kill %d", k))
		g.kill()
		if k == 2 {
			up.oncallDown.Store(false) // oncall comes back while the gateway is down
		}
		time.Sleep(200 * time.Millisecond)
		g.start(t)
	}
	load.check(t, up, total, deliver.UnrecordedPerWorker*workersPerDestination*kills)
}

// TestFanOutOnTwoRedisNodesLosesNothingWhenOneIsKilled: the same route on two nodes sharing one
// Redis, each taking half the providers' requests; one node is killed with -9 halfway and stays
// down, its senders resending to the other. Every acknowledged event reaches every destination
// that takes it (the survivor delivers the dead node's leased events once their leases lapse),
// none reaches one that does not, and each destination's duplicates are within the bound of one
// kill.
func TestFanOutOnTwoRedisNodesLosesNothingWhenOneIsKilled(t *testing.T) {
	t.Parallel()
	const total, senders = 4000, 32
	redis := durableRedis(t)
	up := newFanOutUpstream(t)
	up.oncallDown.Store(true)
	storage := fmt.Sprintf("storage redis redis://%s {\n\t\t\tprefix hgfan\n\t\t\tread_timeout 4s\n\t\t}", redis.Addr)
	a, b := fanOutGateway(t, up, storage), fanOutGateway(t, up, storage)
	a.start(t)
	b.start(t)
	load := startFanOutLoad(t, "fan2", []string{
		fmt.Sprintf("http://localhost:%d/hooks/orders", a.port), fmt.Sprintf("http://localhost:%d/hooks/orders", b.port),
	}, total, senders)
	load.waitAcked(t, total/2, "before node A is killed")
	a.kill()
	up.oncallDown.Store(false)
	load.check(t, up, total, deliver.UnrecordedPerWorker*workersPerDestination)
}

// copyCaddyfile is a sync route in front of the app (the upstream's /hooks/orders) with a copy
// for the service replacing it (its /next).
const copyCaddyfile = `{
	admin {$HOOKGATE_ADMIN}
}
http://localhost:{$HOOKGATE_PORT} {
	bind 127.0.0.1
	hookgate /hooks/orders* {
		preset standard
		name orders
		secret {env.STANDARD_WEBHOOK_SECRET}
		copy next http://127.0.0.1:{$HOOKGATE_FORWARD_PORT}/next {
			timeout 2s
			backoff 100ms 500ms
			max_attempts 1000
		}
	}
	reverse_proxy 127.0.0.1:{$HOOKGATE_FORWARD_PORT}
}
`

// TestCopiesLoseNothingTheAppTookAcrossCrashes: a sync route with a copy takes a load of signed
// events while Caddy is killed with -9 three times. Every event whose 2xx (the app's) reached
// the provider also reaches the copy, and the copy's duplicates are within the crash bound.
func TestCopiesLoseNothingTheAppTookAcrossCrashes(t *testing.T) {
	t.Parallel()
	const total, senders, kills = 4000, 32, 3
	up := newFanOutUpstream(t)
	config := filepath.Join(t.TempDir(), "copy.Caddyfile")
	if err := os.WriteFile(config, []byte(copyCaddyfile), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newBinaryGateway(t, config)
	g.env = append(g.env, "STANDARD_WEBHOOK_SECRET="+hooktest.Secret, fmt.Sprintf("HOOKGATE_FORWARD_PORT=%d", up.port()))
	g.start(t)
	load := startFanOutLoad(t, "copy", []string{fmt.Sprintf("http://localhost:%d/hooks/orders", g.port)}, total, senders)
	for k := 1; k <= kills; k++ {
		load.waitAcked(t, int64(k*total/(kills+1)), fmt.Sprintf("before kill %d", k))
		g.kill()
		time.Sleep(200 * time.Millisecond)
		g.start(t)
	}
	load.done.Wait()
	if len(load.acked) != total {
		t.Fatalf("%d of %d events acknowledged", len(load.acked), total)
	}
	hooktest.WaitFor(t, "every event the app took at the copy", 120*time.Second, func() bool {
		for id := range load.acked {
			if up.count("/next", id) == 0 {
				return false
			}
		}
		return true
	})
	duplicates, bound := up.total("/next")-total, deliver.UnrecordedPerWorker*workersPerDestination*kills
	t.Logf("the app got %d requests for %d events; the copy %d deliveries, %d duplicates (bound %d)", up.total("/hooks"), total, up.total("/next"), duplicates, bound)
	if duplicates > bound {
		t.Errorf("the copy got %d duplicates, more than the %d that can be sent and unrecorded at %d kills", duplicates, bound, kills)
	}
}
