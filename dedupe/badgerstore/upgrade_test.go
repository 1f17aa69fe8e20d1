package badgerstore

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hookgate/hookgate/dedupe/ledgertest"
)

// A ledger written by an earlier build (testdata/queue-fixture, whose BUILD says which) opens
// with its queue intact: pending events are delivered once, the dead letter replays.
func TestALedgerFromAnEarlierBuildKeepsItsQueue(t *testing.T) {
	dir := t.TempDir()
	entries, err := os.ReadDir("testdata/queue-fixture")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "BUILD" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata/queue-fixture", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ledgertest.CheckQueueFixture(t, s)
}
