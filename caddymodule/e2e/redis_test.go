//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookgate/hookgate/internal/hooktest"
)

// TestTwoNodesOnRedisForwardAnEventSentToBothOnce sends each signed event to both nodes at the
// same moment, as a provider's retry landing on the other node would: one node takes it, the other
// answers that it is a duplicate (or, in sync mode, in flight), and the app sees it once.
func TestTwoNodesOnRedisForwardAnEventSentToBothOnce(t *testing.T) {
	t.Parallel()
	rd := durableRedis(t)
	sentToBothAtOnce(t, redisStorage(false, rd.Addr), []string{"async"}, []string{"sync"}, 400, 200)
}

// sentToBothAtOnce runs the both-at-once test on two nodes sharing storage, spreading the events
// over the async and the sync routes.
func sentToBothAtOnce(t *testing.T, storage string, asyncRoutes, syncRoutes []string, nAsync, nSync int) {
	sink := newDeliverySink(t, 0)
	var routes []nodeRoute
	for _, r := range asyncRoutes {
		routes = append(routes, nodeRoute{r, true})
	}
	for _, r := range syncRoutes {
		routes = append(routes, nodeRoute{r, false})
	}
	nodes := twoNodes(t, storage, sink, routes...)
	client := twoNodeClient()

	t.Run("async", func(t *testing.T) {
		start, before := time.Now(), sink.total()
		var pairs tally
		ids := make([]string, nAsync)
		parallel(nAsync, 16, func(i int) {
			ev := hooktest.NewEvent(t, fmt.Sprintf("evt_both_async_%d", i), fmt.Sprintf("obj_both_async_%d", i), 1)
			ids[i] = ev.ID
			got := sendToBoth(client, nodes, asyncRoutes[i%len(asyncRoutes)], ev)
			pairs.add(pairOf(got))
		})
		sink.waitDelivered(t, ids, 30*time.Second)
		time.Sleep(time.Second) // room for a second delivery to arrive, if there is one
		delivered := sink.total() - before
		t.Logf("%d events each sent to both nodes at once (%d requests): answers %v; %d deliveries, %d duplicates, in %v",
			nAsync, 2*nAsync, &pairs, delivered, delivered-nAsync, time.Since(start).Round(time.Millisecond))
		if n := pairs.get("accepted+duplicate"); n != nAsync {
			t.Errorf("%d of %d events were accepted by one node and a duplicate on the other; want all", n, nAsync)
		}
		if delivered != nAsync {
			t.Errorf("%d deliveries of %d events; want each delivered exactly once", delivered, nAsync)
		}
	})

	t.Run("sync", func(t *testing.T) {
		sink.delay.Store(int64(30 * time.Millisecond)) // the first is still in flight when the second arrives
		defer sink.delay.Store(0)
		start, before := time.Now(), sink.total()
		var pairs tally
		var retried tally
		ids := make([]string, nSync)
		parallel(nSync, 16, func(i int) {
			ev := hooktest.NewEvent(t, fmt.Sprintf("evt_both_sync_%d", i), fmt.Sprintf("obj_both_sync_%d", i), 1)
			ids[i] = ev.ID
			route := syncRoutes[i%len(syncRoutes)]
			got := sendToBoth(client, nodes, route, ev)
			pairs.add(pairOf(got))
			// A provider retries a 409: once the first is done, the retry is a duplicate.
			for node, o := range got {
				if o == "in-flight" {
					r, err := hooktest.TrySendTo(client, nodes[node].url(route), ev)
					retried.add(answerKind(r, err))
				}
			}
		})
		delivered := sink.total() - before
		t.Logf("%d events each sent to both nodes at once (%d requests): answers %v; the in-flight ones resent: %v; %d forwarded, %d duplicates, in %v",
			nSync, 2*nSync, &pairs, &retried, delivered, delivered-nSync, time.Since(start).Round(time.Millisecond))
		if n := pairs.get("duplicate+forwarded") + pairs.get("forwarded+in-flight"); n != nSync {
			t.Errorf("%d of %d events were forwarded by one node while the other answered duplicate or in flight; want all", n, nSync)
		}
		if n := pairs.get("forwarded+in-flight"); retried.get("duplicate") != n {
			t.Errorf("resent after an in-flight answer: %v; want all %d duplicates", &retried, n)
		}
		if n := sink.missing(ids); n > 0 {
			t.Errorf("%d events never reached the upstream", n)
		}
		if delivered != nSync {
			t.Errorf("%d forwarded for %d events; want each forwarded exactly once", delivered, nSync)
		}
	})
}

// sendToBoth sends ev to route on both nodes at the same moment and returns their outcomes.
func sendToBoth(client *http.Client, nodes [2]*gatewayNode, route string, ev *hooktest.Event) [2]string {
	var got [2]string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range nodes {
		wg.Go(func() {
			<-start
			r, err := hooktest.TrySendTo(client, nodes[i].url(route), ev)
			got[i] = answerKind(r, err)
		})
	}
	close(start)
	wg.Wait()
	return got
}

// pairOf names two nodes' outcomes in a fixed order.
func pairOf(got [2]string) string {
	s := got[:]
	slices.Sort(s)
	return strings.Join(s, "+")
}

// TestTwoNodesOnRedisDropStaleVersions sends versions of one entity out of order across the two
// nodes: once a node took version 2, version 1 on the other node is answered 200 stale and never
// reaches the app; and under versions sent to both nodes at once in random order, the app never
// sees an older version after a newer one.
func TestTwoNodesOnRedisDropStaleVersions(t *testing.T) {
	t.Parallel()
	rd := durableRedis(t)
	sink := newDeliverySink(t, 0)
	nodes := twoNodes(t, redisStorage(false, rd.Addr), sink, nodeRoute{"async", true}, nodeRoute{"sync", false})
	client := twoNodeClient()

	for _, mode := range []struct{ route, taken string }{{"sync", "forwarded"}, {"async", "accepted"}} {
		t.Run(mode.route+"/newer first", func(t *testing.T) {
			const entities = 100
			var newer, older tally
			var v1s, v2s []string
			var mu sync.Mutex
			parallel(entities, 8, func(i int) {
				entity := fmt.Sprintf("obj_order_%s_%d", mode.route, i)
				v2 := hooktest.NewEvent(t, "evt_"+entity+"_v2", entity, 2)
				v1 := hooktest.NewEvent(t, "evt_"+entity+"_v1", entity, 1)
				mu.Lock()
				v1s, v2s = append(v1s, v1.ID), append(v2s, v2.ID)
				mu.Unlock()
				got, err := hooktest.TrySendTo(client, nodes[i%2].url(mode.route), v2)
				newer.add(answerKind(got, err))
				got, err = hooktest.TrySendTo(client, nodes[1-i%2].url(mode.route), v1)
				older.add(answerKind(got, err))
			})
			sink.waitDelivered(t, v2s, 30*time.Second)
			time.Sleep(time.Second) // room for a stale version to arrive, if one was let through
			t.Logf("%d entities, version 2 on one node then version 1 on the other: version 2 %v, version 1 %v; version 1 reached the upstream %d times",
				entities, &newer, &older, entities-sink.missing(v1s))
			if newer.get(mode.taken) != entities || older.get("stale") != entities {
				t.Errorf("want every version 2 %s and every version 1 stale", mode.taken)
			}
			if n := entities - sink.missing(v1s); n > 0 {
				t.Errorf("%d stale versions reached the upstream", n)
			}
		})
	}

	t.Run("async/shuffled", func(t *testing.T) {
		const entities, versions = 40, 5
		sink.delay.Store(int64(20 * time.Millisecond)) // deliveries overlap across the nodes
		defer sink.delay.Store(0)
		var sends []*hooktest.Event
		var latest []string
		for e := range entities {
			entity := fmt.Sprintf("obj_shuffled_%d", e)
			for v := 1; v <= versions; v++ {
				sends = append(sends, hooktest.NewEvent(t, fmt.Sprintf("evt_%s_v%d", entity, v), entity, v))
			}
			latest = append(latest, sends[len(sends)-1].ID)
		}
		rand.Shuffle(len(sends), func(i, j int) { sends[i], sends[j] = sends[j], sends[i] })
		sink.mu.Lock()
		start, before, regressedBefore := time.Now(), sink.deliveries, len(sink.regressions)
		sink.mu.Unlock()
		var answers tally
		parallel(len(sends), 32, func(i int) {
			got, err := hooktest.TrySendTo(client, nodes[i%2].url("async"), sends[i])
			answers.add(answerKind(got, err))
		})
		sink.waitDelivered(t, latest, 30*time.Second)
		time.Sleep(time.Second)
		sink.mu.Lock()
		regressions := slices.Clone(sink.regressions[regressedBefore:])
		sink.mu.Unlock()
		delivered := sink.total() - before
		t.Logf("%d entities × %d versions sent in random order across both nodes: %v; %d delivered (the other accepted ones superseded), %d older after newer, in %v",
			entities, versions, &answers, delivered, len(regressions), time.Since(start).Round(time.Millisecond))
		if answers.get("accepted")+answers.get("stale") != len(sends) {
			t.Errorf("want every answer accepted or stale")
		}
		if len(regressions) > 0 {
			t.Errorf("the upstream saw older versions after newer ones, e.g. %v", regressions[:min(5, len(regressions))])
		}
	})
}
