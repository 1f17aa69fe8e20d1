package badgerstore

import (
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Badger reads its tables (.sst files of 1 MiB, options.go) through memory
// maps. A page it reads that is not in memory faults, and Linux reads around
// the fault as much as the disk's read_ahead_kb: 128 KiB by default, but 8 MiB
// on some virtual disks, where one 4 KiB read of a table's index or of a block
// reads the whole table. With the page cache to spare that only wastes disk
// bandwidth. In a container sized for its backlog (docs/operations.md) each
// such read evicts pages the next lookup needs, and the ledger thrashes:
// draining a backlog of a million events in a 150 MiB memory cgroup read
// 400-500 MB/s from disk, and a value-log rewrite's start, which reads every
// table's index with the committer kept out (gc.go), held every request for up
// to 2 s.
//
// So where a fault reads more than the kernel's default around it (measured
// at open, readahead_linux.go), the store tells the kernel that the tables'
// maps are read at random (MADV_RANDOM): a fault reads the page it needs. That
// has costs, which is why it is not done everywhere: since Linux 6.3 reclaim
// ignores whether the pages of such a map were used lately, so a hot index
// page is evicted as soon as a cold one, and a compaction reads its tables
// page by page. The value log keeps the readahead: queued bodies are read back
// mostly in the order they were written, by deliveries and value-log
// rewrites, and a drain read them more slowly page by page.
//
// Badger maps a new table at every flush and compaction. Its pages are in
// memory then, just written, so advising the new maps every adviseInterval is
// soon enough.
const adviseInterval = time.Second

// defaultReadAround is what the kernel reads around a fault by default
// (read_ahead_kb 128): on such a disk the tables keep it.
const defaultReadAround = 128 << 10

// adviser advises the kernel of the store's new maps every adviseInterval until
// stopped.
type adviser struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

// startAdviser starts advising the maps of the tables in dir, at once and
// then every adviseInterval, if a fault there reads more than
// defaultReadAround; otherwise it does nothing. A failure is logged once and
// ends it: reads stay correct, only slower under memory pressure.
func startAdviser(dir string, log badger.Logger) *adviser {
	a := &adviser{stop: make(chan struct{}), done: make(chan struct{})}
	around, err := readAround(dir)
	if err != nil {
		log.Warningf("tables are read with the disk's readahead: %v", err)
	}
	if err != nil || around <= defaultReadAround {
		close(a.done)
		return a
	}
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
