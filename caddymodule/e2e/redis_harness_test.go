//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// The two-node tests run two xcaddy-built Caddy processes (each with its own HTTP port, admin port
// and data directory) sharing one ledger in a redis-server the test starts, in front of one sink.

// Every async route of a two-node test forwards with these settings: a short timeout makes a
// short lease (the timeout plus the deliverer's 30s margin), so a dead node's leases lapse
// within the test; retries come quickly and never run out.
const twoNodeWorkers = 16

// nodeRoute is one hookgate route of a node, at path /<name>: async (forward to the sink) or
// sync (reverse_proxy to the sink).
type nodeRoute struct {
	name  string
	async bool
}

// durableRedis starts a redis-server that fsyncs its append-only file before every reply, and
// stops it when the test ends.
func durableRedis(t *testing.T) *redistest.Server {
	t.Helper()
	s, err := redistest.Start(filepath.Join(t.TempDir(), "redis"), redistest.Durable...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// redisStorage is the storage line that makes every node share the ledger at addrs: one server,
// or the seed nodes of a cluster. Its read timeout is twice the default: these tests run beside
// others on a loaded machine, where an fsync of the append-only file can hold Redis's reply past
// the default 2s, and what they prove is what is acknowledged and delivered, not how fast Redis
// answers (a request's deadline, about 2 × read_timeout, stays under the client's 10s).
func redisStorage(cluster bool, addrs ...string) string {
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "redis://" + a
	}
	block := "prefix hgtest\n\t\t\tread_timeout 4s"
	if cluster {
		block += "\n\t\t\tcluster"
	}
	return fmt.Sprintf("storage redis %s {\n\t\t\t%s\n\t\t}", strings.Join(urls, " "), block)
}

// twoNodes starts two nodes with the same routes on storage, in front of sink.
func twoNodes(t *testing.T, storage string, sink *deliverySink, routes ...nodeRoute) [2]*gatewayNode {
	t.Helper()
	var nodes [2]*gatewayNode
	for i := range nodes {
		nodes[i] = startNode(t, fmt.Sprintf("node%c", 'A'+i), storage, sink.URL, routes)
	}
	return nodes
}

// gatewayNode is one Caddy process of a two-node test, its log kept quietly and shown only when
// the test fails.
type gatewayNode struct {
	*binaryGateway
	name string
	log  *tailLog
}

func startNode(t *testing.T, name, storage, sinkURL string, routes []nodeRoute) *gatewayNode {
	t.Helper()
	g := newBinaryGateway(t, filepath.Join(t.TempDir(), "Caddyfile"))
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin {$HOOKGATE_ADMIN}\n}\n\nhttp://:{$HOOKGATE_PORT} {\n\tbind 127.0.0.1\n")
	for _, r := range routes {
		fmt.Fprintf(&b, `	hookgate /%s {
		preset standard
		name %s
		secret {env.HOOKGATE_SECRET}
		version json data.object.id json data.object.updated
		%s
`, r.name, r.name, storage)
		if r.async {
			fmt.Fprintf(&b, `		forward %s {
			timeout 2s
			backoff 200ms
			jitter none
			max_attempts 1000
			workers %d
		}
`, sinkURL, twoNodeWorkers)
		}
		b.WriteString("\t}\n")
	}
	fmt.Fprintf(&b, "\treverse_proxy %s\n}\n", strings.TrimPrefix(sinkURL, "http://"))
	if err := os.WriteFile(g.config, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &gatewayNode{binaryGateway: g, name: name, log: newTailLog(t, name)}
	n.start(t)
	return n
}

// start runs the node's binary (again, after a kill) and waits until it listens.
func (n *gatewayNode) start(t *testing.T) {
	t.Helper()
	n.cmd = exec.Command(n.bin, "run", "--config", n.config, "--adapter", "caddyfile")
	n.cmd.Env = n.env
	n.cmd.Stderr = n.log
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hooktest.WaitFor(t, n.name+" listening", 20*time.Second, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n.port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func (n *gatewayNode) url(route string) string {
	return fmt.Sprintf("http://127.0.0.1:%d/%s", n.port, route)
}

// tailLog keeps the last lines a Caddy process wrote and shows them if the test fails.
type tailLog struct {
	mu    sync.Mutex
	lines []string
	total int
}

func newTailLog(t *testing.T, name string) *tailLog {
	l := &tailLog{}
	t.Cleanup(func() {
		if t.Failed() {
			l.mu.Lock()
			t.Logf("%s wrote %d log lines; the last %d:\n%s", name, l.total, len(l.lines), strings.Join(l.lines, "\n"))
			l.mu.Unlock()
		}
	})
	return l
}

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.total++
		l.lines = append(l.lines, line)
		if len(l.lines) > 40 {
			l.lines = l.lines[1:]
		}
	}
	return len(p), nil
}

// deliverySink is the app behind both nodes: it counts what reaches it by event ID and notes,
// per entity, every version that arrives after a newer one.
type deliverySink struct {
	*httptest.Server
	delay atomic.Int64 // nanoseconds each request is held before its 200

	mu          sync.Mutex
	perID       map[string]int
	firstAt     map[string]time.Time
	lastVersion map[string]int
	regressions []string
	deliveries  int
}

func newDeliverySink(t *testing.T, delay time.Duration) *deliverySink {
	s := &deliverySink{perID: map[string]int{}, firstAt: map[string]time.Time{}, lastVersion: map[string]int{}}
	s.delay.Store(int64(delay))
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *deliverySink) serve(w http.ResponseWriter, r *http.Request) {
	var ev struct {
		Data struct {
			Object struct {
				ID      string `json:"id"`
				Updated int    `json:"updated"`
			} `json:"object"`
		} `json:"data"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &ev)
	id, entity, version := r.Header.Get("Hookgate-Event-Id"), ev.Data.Object.ID, ev.Data.Object.Updated
	s.mu.Lock()
	s.deliveries++
	s.perID[id]++
	if s.perID[id] == 1 {
		s.firstAt[id] = time.Now()
	}
	if last, seen := s.lastVersion[entity]; seen && version < last {
		s.regressions = append(s.regressions, fmt.Sprintf("%s: version %d after %d", entity, version, last))
	} else {
		s.lastVersion[entity] = version
	}
	s.mu.Unlock()
	time.Sleep(time.Duration(s.delay.Load()))
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"sink":"delivered","id":%q}`, id)
}

func (s *deliverySink) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perID[id]
}

func (s *deliverySink) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deliveries
}

// missing is how many of ids never reached the sink.
func (s *deliverySink) missing(ids []string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if s.perID[id] == 0 {
			n++
		}
	}
	return n
}

// waitDelivered waits until every one of ids reached the sink, and fails saying how many did not.
func (s *deliverySink) waitDelivered(t *testing.T, ids []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for s.missing(ids) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := s.missing(ids); n > 0 {
		t.Fatalf("%d of %d acknowledged events never reached the upstream within %v (%d deliveries in all)", n, len(ids), within, s.total())
	}
}

// answerKind names an answer of a hookgate route.
func answerKind(got hooktest.Reply, err error) string {
	switch {
	case err != nil:
		return "error"
	case got.Status == http.StatusAccepted:
		return "accepted"
	case got.Status == http.StatusOK && strings.Contains(got.Body, `"duplicate":true`):
		return "duplicate"
	case got.Status == http.StatusOK && strings.Contains(got.Body, `"stale":true`):
		return "stale"
	case got.Status == http.StatusOK && strings.Contains(got.Body, `"sink":"delivered"`):
		return "forwarded"
	case got.Status == http.StatusConflict && got.Header.Get("Retry-After") != "":
		return "in-flight"
	case got.Status == http.StatusServiceUnavailable && got.Header.Get("Retry-After") != "":
		return "unavailable"
	}
	return fmt.Sprintf("%d %s", got.Status, bytes.TrimSpace([]byte(got.Body)))
}

// tally counts outcomes from many goroutines.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *tally) add(outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[outcome]++
}

func (c *tally) get(outcome string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[outcome]
}

func (c *tally) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.n)
}

// twoNodeClient is a provider's client: many connections to each node, bounded waits.
func twoNodeClient() *http.Client {
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}
}

// parallel runs f(i) for i in [0, n) on workers goroutines.
func parallel(n, workers int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		})
	}
	wg.Wait()
}
