package badgerstore

import (
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Badger reads its tables (.sst files of 1 MiB, options.go) through memory
// maps. A page it reads that is not in memory faults, and Linux reads around
// the fault as much as the disk's read_ahead_kb, 8 MiB on some virtual disks:
// one 4 KiB read of a table's index or of a block then reads the whole table.
// With the page cache to spare that only wastes disk bandwidth. In a container
// sized for its backlog (docs/operations.md) each such read evicts pages the
// next lookup needs, and the ledger thrashes: draining a backlog of a million
// events in a 150 MiB memory cgroup read 400-500 MB/s from disk, and a
// value-log rewrite's start, which reads every table's index with the
// committer kept out (gc.go), held every request for up to 2 s.
//
// So the store tells the kernel that the tables' maps are read at random
// (MADV_RANDOM, readahead_linux.go): a fault reads the page it needs.
// Compactions, which scan tables, then read them page by page, beside the
// requests. The value log keeps the kernel's readahead: queued bodies are
// read back mostly in the order they were written, by deliveries and by
// value-log rewrites, and a drain read them more slowly page by page.
//
// Badger maps a new table at every flush and compaction. Its pages are in
// memory then, just written, so advising the new maps every adviseInterval is
// soon enough.
const adviseInterval = time.Second

// adviser advises the kernel of the store's new maps every adviseInterval until
// stopped.
type adviser struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// startAdviser starts advising the maps of the tables in dir, at once and
// then every adviseInterval. A failure is logged once and ends it:
// reads stay correct, only slower under memory pressure.
func startAdviser(dir string, log badger.Logger) *adviser {
	a := &adviser{stop: make(chan struct{}), done: make(chan struct{})}
	go a.run(newMappedFiles(dir), log)
	return a
}

func (a *adviser) run(files *mappedFiles, log badger.Logger) {
	defer close(a.done)
	tick := time.NewTicker(adviseInterval)
	defer tick.Stop()
	for {
		if err := files.adviseRandomReads(); err != nil {
			log.Warningf("tables are read with the disk's readahead: %v", err)
			return
		}
		select {
		case <-a.stop:
			return
		case <-tick.C:
		}
	}
}

// close stops the adviser and waits for it. It may be called more than once.
func (a *adviser) close() {
	a.stopOnce.Do(func() { close(a.stop) })
	<-a.done
}
