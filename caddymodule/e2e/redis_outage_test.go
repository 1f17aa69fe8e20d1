//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/deliver"
	"github.com/hookgate/hookgate/internal/hooktest"
)

// TestTwoNodesOnRedisSurvivorDeliversWhatTheKilledNodeAcknowledged loads both nodes with signed
// events in front of a slow app, so deliveries are in flight, and kills one node with -9 for good.
// Every event either node acknowledged reaches the app: the dead node's queue is the survivor's,
// and the events it had leased are taken over once their lease lapses (the forward timeout plus
// 30s). The only duplicates are the events the dead node had sent and not yet recorded.
func TestTwoNodesOnRedisSurvivorDeliversWhatTheKilledNodeAcknowledged(t *testing.T) {
	t.Parallel()
	rd := durableRedis(t)
	takeover(t, redisStorage(false, rd.Addr), []string{"async"}, 3000)
}

// takeover runs the kill test on two nodes sharing storage, spreading the events over routes.
func takeover(t *testing.T, storage string, routes []string, total int) {
	sink := newDeliverySink(t, 50*time.Millisecond)
	var rs []nodeRoute
	for _, r := range routes {
		rs = append(rs, nodeRoute{r, true})
	}
	nodes := twoNodes(t, storage, sink, rs...)
	load := newTwoNodeLoad(t, "takeover", nodes, routes, total, 32)
	load.run()
	load.waitAckCount(t, total/3)
	nodes[0].kill()
	killedAt := time.Now()
	ackedAtKill, deliveredAtKill := load.ackCount.Load(), sink.total()
	load.waitAcked(t)
	ackedAll := time.Since(load.started)

	sink.waitDelivered(t, load.acked(-1), 75*time.Second)
	byKilled := load.acked(0)
	// A's leases lapse 32s after they were taken (the 2s timeout plus the 30s margin), some
	// time before the kill; the survivor drains the rest of the queue in a few seconds.
	var afterKill, afterLease int
	var lastTakenOver time.Duration
	sink.mu.Lock()
	for _, id := range byKilled {
		if at := sink.firstAt[id]; at.After(killedAt) {
			afterKill++
			lastTakenOver = max(lastTakenOver, at.Sub(killedAt))
			if at.Sub(killedAt) > 20*time.Second {
				afterLease++
			}
		}
	}
	sink.mu.Unlock()
	deliveries := sink.total()
	// Sent and not recorded when A died: on each route, the attempts in flight and those answered
	// while their outcome waited for its write, deliver.UnrecordedPerWorker × the workers at most
	// (docs/delivery.md).
	duplicates, bound := deliveries-total, deliver.UnrecordedPerWorker*twoNodeWorkers*len(routes)
	t.Logf("%d events sent to 2 nodes (%d routes), answers %v; node A killed at %d acknowledged/%d delivered; %d acknowledged by A, %d of them delivered by B after the kill, %d of those over 20s after it, once A's leases lapsed (the last %v after it); %d deliveries, %d duplicates (bound %d: %d × A's workers on each route); all acknowledged after %v, all delivered after %v",
		total, len(routes), &load.outcomes, ackedAtKill, deliveredAtKill, len(byKilled), afterKill, afterLease, lastTakenOver.Round(time.Millisecond),
		deliveries, duplicates, bound, deliver.UnrecordedPerWorker, ackedAll.Round(time.Millisecond), time.Since(load.started).Round(time.Millisecond))
	if duplicates > bound {
		t.Errorf("%d duplicates at the upstream, more than the %d events node A can have sent and not recorded", duplicates, bound)
	}
	if !nodes[1].alive() {
		t.Error("the surviving node is not running")
	}
}

// TestTwoNodesOnRedisRestartAnswer503WhileDownThenDeliverEverything kills the shared
// redis-server (appendfsync always) under a load on both nodes, and starts it again on the same
// port and directory a few seconds later. While it is down every request is answered 503 with
// Retry-After, never a 2xx; both nodes keep running, and once it is back every acknowledged event
// reaches the app without anyone restarting the nodes.
func TestTwoNodesOnRedisRestartAnswer503WhileDownThenDeliverEverything(t *testing.T) {
	t.Parallel()
	const total, downFor = 2000, 3 * time.Second
	rd := durableRedis(t)
	sink := newDeliverySink(t, 20*time.Millisecond)
	nodes := twoNodes(t, redisStorage(false, rd.Addr), sink, nodeRoute{"async", true}, nodeRoute{"sync", false})

	type answer struct {
		sent, done time.Time
		outcome    string
	}
	var mu sync.Mutex
	var answers []answer
	record := func(sent, done time.Time, got hooktest.Reply, err error) {
		mu.Lock()
		answers = append(answers, answer{sent, done, answerKind(got, err)})
		mu.Unlock()
	}
	load := newTwoNodeLoad(t, "restart", nodes, []string{"async"}, total, 16)
	load.answered = record
	load.run()
	load.waitAckCount(t, total/3)

	rd.Kill()
	down := time.Now()
	ackedAtKill := load.ackCount.Load()
	// A provider's sync route is refused too while Redis is down.
	client := twoNodeClient()
	for i := 0; time.Since(down) < downFor; i++ {
		ev := hooktest.NewEvent(t, fmt.Sprintf("evt_restart_sync_%d", i), "obj_restart_sync", i+1)
		sent := time.Now()
		got, err := hooktest.TrySendTo(client, nodes[i%2].url("sync"), ev)
		record(sent, time.Now(), got, err)
		time.Sleep(100 * time.Millisecond)
	}
	up := time.Now()
	if err := rd.Restart(); err != nil {
		t.Fatal(err)
	}
	load.waitAcked(t)
	ackedAll := time.Since(load.started)
	acked := load.acked(-1)
	sink.waitDelivered(t, acked, 75*time.Second)

	var whileDown tally
	mu.Lock()
	for _, a := range answers {
		if !a.sent.Before(down) && !a.done.After(up) {
			whileDown.add(a.outcome)
		}
	}
	mu.Unlock()
	// How soon the deliverers resumed by themselves, and how many events waited for the leases
	// taken before the outage (their outcome could not be recorded) to lapse.
	firstAfter, lastAfter, within10s := time.Duration(-1), time.Duration(0), 0
	sink.mu.Lock()
	deliveries := sink.deliveries
	for _, at := range sink.firstAt {
		if d := at.Sub(up); d > 0 {
			if firstAfter < 0 || d < firstAfter {
				firstAfter = d
			}
			lastAfter = max(lastAfter, d)
			if d <= 10*time.Second {
				within10s++
			}
		}
	}
	sink.mu.Unlock()
	t.Logf("%d events sent to 2 nodes, answers %v; Redis killed at %d acknowledged, down for %v: answers sent and answered while down %v; after the restart the first delivery came %v after it, %d events delivered within 10s of it, the last %v after it; %d acknowledged, %d deliveries, %d duplicates; all acknowledged after %v, all delivered after %v",
		total, &load.outcomes, ackedAtKill, downFor, &whileDown, firstAfter.Round(time.Millisecond), within10s, lastAfter.Round(time.Millisecond),
		len(acked), deliveries, deliveries-total,
		ackedAll.Round(time.Millisecond), time.Since(load.started).Round(time.Millisecond))
	// Only events sent and not recorded when Redis died can be delivered again (nothing is
	// leased while it is down): on each node, the attempts in flight and those answered while
	// their outcome waited for its write, deliver.UnrecordedPerWorker × the workers at most
	// (docs/delivery.md).
	if bound := 2 * deliver.UnrecordedPerWorker * twoNodeWorkers; deliveries-total > bound {
		t.Errorf("%d duplicates at the upstream, more than the %d events both nodes can have sent and not recorded", deliveries-total, bound)
	}
	whileDown.mu.Lock()
	for o, n := range whileDown.n {
		if o != "unavailable" {
			t.Errorf("%d answers %q while Redis was down; want only 503 with Retry-After", n, o)
		}
	}
	whileDown.mu.Unlock()
	if whileDown.get("unavailable") == 0 {
		t.Error("no request was answered while Redis was down")
	}
	if slices.ContainsFunc(nodes[:], func(n *gatewayNode) bool { return !n.alive() }) {
		t.Error("a node stopped running")
	}
}
