package badgerstore

import (
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Badger reads its tables (.sst) and value-log files (.vlog) through memory
// maps. A page it reads that is not in memory faults, and Linux reads around
// the fault as much as the disk's read_ahead_kb, 8 MiB on some virtual disks:
// one 4 KiB read of a table's index, a block or a queued body then reads a
// whole 1 MiB table, or megabytes of value log. With the page cache to spare
// that only wastes disk bandwidth. In a container sized for its backlog
// (docs/operations.md) each such read evicts pages the next lookup needs, and
// the ledger thrashes: draining a backlog of a million events in a 150 MiB
// memory cgroup read 400-500 MB/s from disk, and a value-log rewrite's start,
// which reads every table's index with the committer kept out (gc.go), held
// requests for up to 2 s.
//
// So the store tells the kernel that these maps are read at random
// (MADV_RANDOM, readahead_linux.go): a fault reads the page it needs. Badger's
// own scans, a compaction's or a rewrite's, then read page by page, but they
// run beside the requests. Badger maps new files as it flushes, compacts and
// fills value-log files, and a new file's pages are in memory when it is
// mapped, having just been written, so advising the new maps every
// adviseInterval is soon enough.
const adviseInterval = time.Second

// adviser advises the kernel of the store's new maps every adviseInterval until
// stopped.
type adviser struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// startAdviser starts advising the maps of the ledger files in dir, once at
// once and then every adviseInterval. A failure is logged once and ends it:
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
			log.Warningf("ledger files are read with the disk's readahead: %v", err)
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
