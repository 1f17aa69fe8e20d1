//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// orderCaddyfile is a route whose lone forward orders its events by the X-Order-Key header, with
// quick retries that never run out. storage is the route's storage line ("" for Badger).
func orderCaddyfile(storage string) string {
	return "{\n\tadmin {$HOOKGATE_ADMIN}\n}\nhttp://localhost:{$HOOKGATE_PORT} {\n\tbind 127.0.0.1\n\thookgate /hooks/orders* {\n" +
		"\t\tpreset standard\n\t\tname orders\n\t\tsecret {env.STANDARD_WEBHOOK_SECRET}\n\t\t" + storage + "\n" +
		"\t\tforward http://127.0.0.1:{$HOOKGATE_FORWARD_PORT} {\n\t\t\torder header X-Order-Key\n\t\t\ttimeout 2s\n" +
		"\t\t\tbackoff 100ms 300ms 1s\n\t\t\tmax_attempts 1000\n\t\t\tpause_after 1000\n\t\t}\n\t}\n}\n"
}

// orderedApp answers 503 to a share of the attempts at random, and to every attempt while down,
// and keeps, per key, the events it took (200) in the order it took them, and their
// Hookgate-Sequence.
type orderedApp struct {
	*httptest.Server
	failShare float64
	down      atomic.Bool
	mu        sync.Mutex
	taken     map[string][]int // key → the event indexes taken, in order
	sequences map[string][]int // key → their Hookgate-Sequence, in the same order
}

func newOrderedApp(t *testing.T, failShare float64) *orderedApp {
	a := &orderedApp{failShare: failShare, taken: map[string][]int{}, sequences: map[string][]int{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.down.Load() || rand.Float64() < a.failShare {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		id := r.Header.Get("Hookgate-Event-Id") // evt_<key>_<index>
		cut := strings.LastIndexByte(id, '_')
		n, _ := strconv.Atoi(id[cut+1:])
		seq, _ := strconv.Atoi(r.Header.Get("Hookgate-Sequence"))
		key := r.Header.Get("X-Order-Key")
		a.mu.Lock()
		a.taken[key] = append(a.taken[key], n)
		a.sequences[key] = append(a.sequences[key], seq)
		a.mu.Unlock()
	}))
	t.Cleanup(a.Close)
	return a
}

// orderLoad sends perKey events of each of keys keys, a key's events one after another (the next
// once the last is acknowledged), each to the next gateway in turn, so that every gateway accepts
// events of every key, resending to the next on a connection error or a 503.
type orderLoad struct {
	acked atomic.Int64
	done  sync.WaitGroup
	given atomic.Int64
}

func startOrderLoad(t *testing.T, urls []string, keys, perKey, senders int) *orderLoad {
	l := &orderLoad{}
	client := &http.Client{Timeout: 10 * time.Second}
	for s := range senders {
		l.done.Go(func() {
			for i := range perKey {
				for k := s; k < keys; k += senders {
					key := fmt.Sprintf("k%03d", k)
					ev := hooktest.SignedEvent(t, fmt.Sprintf("evt_%s_%d", key, i), fmt.Sprintf(`{"key":%q,"n":%d}`, key, i), time.Now(), hooktest.Secret)
					ev.Headers.Set("X-Order-Key", key)
					node, sent := (k+i)%len(urls), false
					for deadline := time.Now().Add(2 * time.Minute); !sent && time.Now().Before(deadline); node = (node + 1) % len(urls) {
						got, err := hooktest.TrySendTo(client, urls[node], ev)
						if sent = err == nil && (got.Status == http.StatusAccepted || got.Status == http.StatusOK); !sent {
							time.Sleep(50 * time.Millisecond)
						}
					}
					if !sent {
						l.given.Add(1)
						return
					}
					l.acked.Add(1)
				}
			}
		})
	}
	return l
}

// checkOrder waits for every key's perKey events and fails unless each key's were taken in the
// order they were acknowledged, with their sequence numbers rising, a repeat allowed only of the
// event taken last.
func (a *orderedApp) checkOrder(t *testing.T, keys, perKey int) {
	t.Helper()
	hooktest.WaitFor(t, "every acknowledged event taken", 5*time.Minute, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for k := range keys {
			got := a.taken[fmt.Sprintf("k%03d", k)]
			if len(got) == 0 || got[len(got)-1] != perKey-1 {
				return false
			}
		}
		return true
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	repeats := 0
	for k := range keys {
		key := fmt.Sprintf("k%03d", k)
		next, lastSeq := 0, 0
		for i, n := range a.taken[key] {
			seq := a.sequences[key][i]
			switch {
			case n == next && seq > lastSeq:
				next++
			case n == next-1 && seq == lastSeq:
				repeats++
			default:
				t.Fatalf("key %s: event %d (sequence %d) taken after %d (sequence %d); taken so far %v, sequences %v",
					key, n, seq, next-1, lastSeq, a.taken[key], a.sequences[key])
			}
			lastSeq = seq
		}
		if next != perKey {
			t.Fatalf("key %s: %d of %d events taken", key, next, perKey)
		}
	}
	t.Logf("%d keys × %d events taken in order; %d repeats of the event taken last", keys, perKey, repeats)
}

func orderGateway(t *testing.T, app *orderedApp, storage string) *binaryGateway {
	config := filepath.Join(t.TempDir(), "order.Caddyfile")
	if err := os.WriteFile(config, []byte(orderCaddyfile(storage)), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newBinaryGateway(t, config)
	port := app.Listener.Addr().String()[strings.LastIndexByte(app.Listener.Addr().String(), ':')+1:]
	g.env = append(g.env, "STANDARD_WEBHOOK_SECRET="+hooktest.Secret, "HOOKGATE_FORWARD_PORT="+port)
	return g
}

const (
	orderKeys, orderPerKey, orderSenders = 500, 40, 50
	orderDown                            = 30 * time.Second
)

// TestOrderedTwoNodesOnRedisKeepEachKeysOrderThroughAKill: 20,000 events over 500 keys sent to two
// nodes on one Redis (each key's events to both, in turn), the app failing 30 % of attempts at
// random, one node killed -9 mid-run while the app takes events and left down, then the app down
// for 30 s: every key's events are taken in acknowledgement order, repeating only the last.
func TestOrderedTwoNodesOnRedisKeepEachKeysOrderThroughAKill(t *testing.T) {
	t.Parallel()
	redis := durableRedis(t)
	app := newOrderedApp(t, 0.3)
	storage := fmt.Sprintf("storage redis redis://%s {\n\t\t\tprefix hgorder\n\t\t\tread_timeout 4s\n\t\t}", redis.Addr)
	a, b := orderGateway(t, app, storage), orderGateway(t, app, storage)
	a.start(t)
	b.start(t)
	load := startOrderLoad(t, []string{
		fmt.Sprintf("http://localhost:%d/hooks/orders", a.port), fmt.Sprintf("http://localhost:%d/hooks/orders", b.port),
	}, orderKeys, orderPerKey, orderSenders)
	// a is killed while the app takes events: the heads it held are sent again by b.
	load.throughKillAndOutage(t, app, a.kill)
}

// TestOrderedBadgerKeepsEachKeysOrderThroughARestart: the same on Badger, the node killed -9
// and started again on its ledger at once.
func TestOrderedBadgerKeepsEachKeysOrderThroughARestart(t *testing.T) {
	t.Parallel()
	app := newOrderedApp(t, 0.3)
	g := orderGateway(t, app, "")
	g.start(t)
	load := startOrderLoad(t, []string{fmt.Sprintf("http://localhost:%d/hooks/orders", g.port)}, orderKeys, orderPerKey, orderSenders)
	// g is killed while the app takes events: the heads in flight are sent again after the restart.
	load.throughKillAndOutage(t, app, func() { g.kill(); g.start(t) })
}

// throughKillAndOutage runs kill once a third of the events are acknowledged, takes the app down
// for orderDown once half are, and checks, once the load has ended, that every key's events
// were taken in order.
func (l *orderLoad) throughKillAndOutage(t *testing.T, app *orderedApp, kill func()) {
	t.Helper()
	hooktest.WaitFor(t, "a third acknowledged", 2*time.Minute, func() bool { return l.acked.Load() >= orderKeys*orderPerKey/3 })
	kill()
	hooktest.WaitFor(t, "half acknowledged", 2*time.Minute, func() bool { return l.acked.Load() >= orderKeys*orderPerKey/2 })
	app.down.Store(true)
	time.Sleep(orderDown)
	app.down.Store(false)
	l.done.Wait()
	if n := l.given.Load(); n > 0 {
		t.Fatalf("%d senders gave up", n)
	}
	app.checkOrder(t, orderKeys, orderPerKey)
}
