//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// twoNodeLoad is a load of signed events on two nodes, one entity per event: event i goes first
// to routes[i%len(routes)] on node i%2. Like providers behind a load balancer, the senders resend
// to the other node after a connection error or a 503 until the event is acknowledged: a 202, or a
// 200 duplicate (the event was queued, and its 202 lost with a killed node).
type twoNodeLoad struct {
	nodes   [2]*gatewayNode
	routes  []string
	events  []*hooktest.Event
	senders int
	// answered, if set, sees every answer with when its request was sent and answered.
	answered func(sent, done time.Time, got hooktest.Reply, err error)

	outcomes tally
	ackCount atomic.Int64
	stop     atomic.Bool
	finished chan struct{}
	started  time.Time

	mu      sync.Mutex
	ackedBy map[string]int // event ID → the node that acknowledged it
	given   []string       // events given up on after a minute unacknowledged
}

func newTwoNodeLoad(t *testing.T, name string, nodes [2]*gatewayNode, routes []string, total, senders int) *twoNodeLoad {
	l := &twoNodeLoad{nodes: nodes, routes: routes, senders: senders, ackedBy: map[string]int{}, finished: make(chan struct{})}
	for i := range total {
		l.events = append(l.events, hooktest.NewEvent(t, fmt.Sprintf("evt_%s_%d", name, i), fmt.Sprintf("obj_%s_%d", name, i), 1))
	}
	t.Cleanup(func() { l.stop.Store(true) })
	return l
}

// run starts the senders; wait waits for them.
func (l *twoNodeLoad) run() {
	l.started = time.Now()
	client := twoNodeClient()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range l.senders {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(l.events) && !l.stop.Load(); i = int(next.Add(1)) - 1 {
				l.send(client, i)
			}
		})
	}
	go func() { wg.Wait(); close(l.finished) }()
}

func (l *twoNodeLoad) send(client *http.Client, i int) {
	ev, route, node := l.events[i], l.routes[i%len(l.routes)], i%2
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !l.stop.Load(); {
		sent := time.Now()
		got, err := hooktest.TrySendTo(client, l.nodes[node].url(route), ev)
		if l.answered != nil {
			l.answered(sent, time.Now(), got, err)
		}
		o := answerKind(got, err)
		l.outcomes.add(o)
		if o == "accepted" || o == "duplicate" {
			l.mu.Lock()
			l.ackedBy[ev.ID] = node
			l.mu.Unlock()
			l.ackCount.Add(1)
			return
		}
		node = 1 - node
		time.Sleep(20 * time.Millisecond)
	}
	l.mu.Lock()
	l.given = append(l.given, ev.ID)
	l.mu.Unlock()
}

// waitAcked waits until the senders are done and fails unless every event was acknowledged.
func (l *twoNodeLoad) waitAcked(t *testing.T) {
	t.Helper()
	select {
	case <-l.finished:
	case <-time.After(90 * time.Second):
		t.Fatalf("the senders did not finish within 90s: %d of %d acknowledged", l.ackCount.Load(), len(l.events))
	}
	if len(l.given) > 0 {
		t.Fatalf("%d of %d events never acknowledged within a minute of resending (answers: %v)", len(l.given), len(l.events), &l.outcomes)
	}
}

// waitAckCount waits until n events are acknowledged.
func (l *twoNodeLoad) waitAckCount(t *testing.T, n int) {
	t.Helper()
	hooktest.WaitFor(t, fmt.Sprintf("%d acknowledged", n), 60*time.Second, func() bool { return l.ackCount.Load() >= int64(n) })
}

// acked lists the acknowledged events, all or only those node acknowledged (node ≥ 0).
func (l *twoNodeLoad) acked(node int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id, by := range l.ackedBy {
		if node < 0 || by == node {
			ids = append(ids, id)
		}
	}
	return ids
}
