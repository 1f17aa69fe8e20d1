package dedupe_test

import (
	"testing"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/ledgertest"
)

// TestConformance runs the Ledger and Outbox contracts against Badger. Badger locks its
// directory, so one process owns a store: there are no other nodes to test with.
func TestConformance(t *testing.T) {
	ledgertest.Run(t, ledgertest.Backend{
		Open: func(t *testing.T) ledgertest.Store {
			b, err := dedupe.OpenBadger(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	})
}
