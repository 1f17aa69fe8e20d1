package redisstore

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe/ledgertest"
	"github.com/hookgate/hookgate/internal/redistest"
)

// backend is the conformance suite's view of stores over newClient: each test gets its own
// prefix, and OpenNodes gives n stores over n clients sharing it.
func backend(newClient func() redis.UniversalClient) ledgertest.Backend {
	return ledgertest.Backend{
		Ordered: true,
		Open:    func(t *testing.T) ledgertest.Store { return New(newClient(), newPrefix()) },
		OpenNodes: func(t *testing.T, n int) []ledgertest.Store {
			prefix := newPrefix()
			nodes := make([]ledgertest.Store, n)
			for i := range nodes {
				nodes[i] = New(newClient(), prefix)
			}
			return nodes
		},
	}
}

// The conformance suites are not parallel tests: some of their checks must land within a
// fraction of a second of a TTL, so they run before the package's parallel tests load the machine.
func TestConformance(t *testing.T) {
	ledgertest.Run(t, backend(func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: server.Addr})
	}))
}

func TestConformanceOnACluster(t *testing.T) {
	cluster := redistest.DurableCluster(t)
	ledgertest.Run(t, backend(func() redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	}))
}
