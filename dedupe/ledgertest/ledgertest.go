// Package ledgertest is the conformance suite of dedupe's Ledger and Outbox contracts: every
// backend runs it from its own tests, so each one keeps the promises the gateway relies on, word
// for word (dedupe/ledger.go, dedupe/outbox.go). Each subtest is one promise, named as it reads.
package ledgertest

import (
	"slices"
	"testing"

	"github.com/hookgate/hookgate/dedupe"
)

// Store is what a backend offers the gateway.
type Store interface {
	dedupe.Ledger
	dedupe.Outbox
}

// Backend is how the suite gets stores to test.
type Backend struct {
	// Open returns a fresh, empty store for one test; the suite closes it.
	Open func(t *testing.T) Store
	// OpenNodes, when set, returns n handles on one fresh store, as n gateway nodes sharing it
	// would hold them (separate clients); the suite closes them. nil for an embedded backend,
	// which one process owns: the cross-node tests are then not run.
	OpenNodes func(t *testing.T, n int) []Store
	// Ordered says the backend offers ordered queues (dedupe.Orderer): their checks run.
	Ordered bool
}

// check is one promise of a single store.
type check struct {
	name string
	// waits says the check sleeps through a TTL: it runs in parallel with the other waiting
	// checks, so the suite's run time is about the longest wait, not their sum.
	waits bool
	run   func(t *testing.T, s Store)
}

// nodesCheck is one promise of a store shared by two gateway nodes.
type nodesCheck struct {
	name string
	run  func(t *testing.T, a, b Store)
}

// Run runs every check of the contracts against b, each as a subtest on a fresh store. The
// checks that wait for a TTL call t.Parallel, so they run after Run returns, before t's
// cleanups: whatever Open needs (a server, say) must be stopped by t.Cleanup, not a defer.
func Run(t *testing.T, b Backend) {
	var checks []check
	for _, group := range [][]check{claimChecks, doneChecks, expiryChecks, acceptChecks, leaseChecks, updateChecks, queryChecks, destinationChecks, copyChecks} {
		checks = append(checks, group...)
	}
	if b.Ordered {
		checks = append(checks, orderChecks...)
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if c.waits {
				t.Parallel()
			}
			s := b.Open(t)
			t.Cleanup(func() { closeStore(t, s) })
			c.run(t, s)
		})
	}
	if b.OpenNodes == nil {
		return
	}
	shared := slices.Concat(nodesChecks, destinationNodesChecks)
	if b.Ordered {
		shared = append(shared, orderNodesChecks...)
	}
	for _, c := range shared {
		t.Run(c.name, func(t *testing.T) {
			nodes := b.OpenNodes(t, 2)
			t.Cleanup(func() {
				for _, s := range nodes {
					closeStore(t, s)
				}
			})
			if len(nodes) != 2 {
				t.Fatalf("OpenNodes(2) returned %d stores", len(nodes))
			}
			c.run(t, nodes[0], nodes[1])
		})
	}
}

func closeStore(t *testing.T, s Store) {
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
