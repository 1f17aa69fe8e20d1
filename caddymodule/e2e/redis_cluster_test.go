//go:build e2e

package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/hookgate/hookgate/internal/redistest"
)

// The cluster tests spread their events over several routes: each route's keys carry one hash
// tag, so each route lives on one shard, and these names land on all three.
var (
	clusterAsyncRoutes = []string{"orders", "payments", "refunds", "invoices"}
	clusterSyncRoutes  = []string{"customers", "disputes"}
)

// TestTwoNodesOnRedisClusterForwardAnEventSentToBothOnce is the both-at-once test against a
// 3-master Redis Cluster: every event delivered (or forwarded) once, whichever shard its route is on.
func TestTwoNodesOnRedisClusterForwardAnEventSentToBothOnce(t *testing.T) {
	t.Parallel()
	c := redistest.DurableCluster(t)
	sentToBothAtOnce(t, redisStorage(true, c.Addrs()...), clusterAsyncRoutes, clusterSyncRoutes, 400, 200)
	everyShardUsed(t, c)
}

// TestTwoNodesOnRedisClusterSurvivorDeliversWhatTheKilledNodeAcknowledged is the kill test
// against a 3-master Redis Cluster: the survivor takes over the dead node's leases on every shard.
func TestTwoNodesOnRedisClusterSurvivorDeliversWhatTheKilledNodeAcknowledged(t *testing.T) {
	t.Parallel()
	c := redistest.DurableCluster(t)
	takeover(t, redisStorage(true, c.Addrs()...), clusterAsyncRoutes, 2000)
	everyShardUsed(t, c)
}

// everyShardUsed fails unless every master holds some of the routes' keys.
func everyShardUsed(t *testing.T, c *redistest.Cluster) {
	t.Helper()
	var sizes []string
	empty := 0
	for _, n := range c.Nodes {
		out, err := n.Command("dbsize")
		if err != nil {
			t.Fatal(err)
		}
		if k, _ := strconv.Atoi(out); k == 0 {
			empty++
		}
		sizes = append(sizes, fmt.Sprintf("%s: %s keys", n.Addr, out))
	}
	t.Logf("keys per master: %s", strings.Join(sizes, ", "))
	if empty > 0 {
		t.Errorf("%d of %d masters hold no keys: the routes did not spread over the shards", empty, len(c.Nodes))
	}
}
