package badgerstore

import (
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Badger reads its tables (.sst files of 1 MiB, options.go) and its value log
// (.vlog files of 8 MiB) through memory maps. A page it reads that is not in
// memory faults, and Linux reads around the fault as much as the disk's
// read_ahead_kb: 128 KiB by default, but 8 MiB on some virtual disks, where
// one 4 KiB read of a table's index reads the whole table, and one queued
// body 8 MiB of value log. With the page cache to spare that only wastes disk
// bandwidth. In a container sized for its backlog (docs/operations.md) each
// such read evicts pages the next read needs, and the ledger thrashes:
// draining a backlog of a million events in a 150 MiB memory cgroup read
// 400-500 MB/s from disk, and the committer, whose lookups and whose
// value-log rewrite's start (gc.go) fault on table pages, held every request
// for up to 2 s.
//
// So where a fault reads more than the kernel's default around it (measured
// at open, readahead_linux.go), the store tells the kernel that the maps of
// its tables and value-log files are read at random (MADV_RANDOM): a fault
// reads the page it needs. That has costs, which is why it is not done
// everywhere: since Linux 6.3 reclaim ignores whether the pages of such a map
// were used lately, so a hot index page is evicted as soon as a cold one, and
// compactions, value-log rewrites and a drain's reads of bodies in the order
// they were written go page by page. With the tables alone advised, the value
// log's 8 MiB reads still saturated the disk in one run of two, and requests
// went up to 2.0 s unanswered.
//
// Badger maps a new file at every flush, compaction and full value-log file.
// Its pages are in memory then, just written, so advising the new maps every
// adviseInterval is soon enough.
const adviseInterval = time.Second

// defaultReadAround is what the kernel reads around a fault by default
// (read_ahead_kb 128): on such a disk the ledger's files keep it.
const defaultReadAround = 128 << 10

// startAdviser starts advising the maps of the ledger's files in dir, at once
// and then every adviseInterval until closed, if a fault there reads more
// than defaultReadAround; otherwise it does nothing. A failure is logged once
// and ends it: reads stay correct, only slower under memory pressure.
func startAdviser(dir string, log badger.Logger) *background {
	around, err := readAround(dir)
	if err != nil {
		log.Warningf("the ledger's files are read with the disk's readahead: %v", err)
	}
	if err != nil || around <= defaultReadAround {
		return startBackground(func(<-chan struct{}) {})
	}
	files := newMappedFiles(dir)
	return startBackground(func(stop <-chan struct{}) {
		tick := time.NewTicker(adviseInterval)
		defer tick.Stop()
		for {
			if err := files.adviseRandomReads(); err != nil {
				log.Warningf("the ledger's files are read with the disk's readahead: %v", err)
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
}
