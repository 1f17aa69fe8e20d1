package badgerstore_test

import (
	"testing"

	"github.com/hookgate/hookgate/dedupe/badgerstore"
	"github.com/hookgate/hookgate/dedupe/ledgertest"
)

// TestConformance runs the Ledger and Outbox contracts against Badger. Badger locks its
// directory, so one process owns a store: there are no other nodes to test with.
func TestConformance(t *testing.T) {
	ledgertest.Run(t, ledgertest.Backend{
		Ordered: true,
		Open: func(t *testing.T) ledgertest.Store {
			b, err := badgerstore.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	})
}
