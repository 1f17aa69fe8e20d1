// Command writefixture writes the Badger ledger that badgerstore's upgrade test opens:
//
//	go run ./dedupe/badgerstore/testdata/writefixture dedupe/badgerstore/testdata/queue-fixture
//
// Run it only with the build whose records the fixture stands for, and say which in
// testdata/queue-fixture/BUILD: later builds must read this one as it is.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hookgate/hookgate/dedupe/badgerstore"
	"github.com/hookgate/hookgate/dedupe/ledgertest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: writefixture DIR (an empty or missing directory)")
		os.Exit(2)
	}
	if err := write(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "writefixture:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	s, err := badgerstore.Open(dir)
	if err != nil {
		return err
	}
	if err := ledgertest.WriteQueueFixture(context.Background(), s, time.Now()); err != nil {
		s.Close()
		return err
	}
	return s.Close()
}
