package badgerstore

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// A table or value-log file Badger maps while the store is open, as a flush makes one, is read
// at random too: the kernel reads the page a lookup faults, not the disk's readahead around it.
func TestLedgerFilesAreMappedForRandomReads(t *testing.T) {
	b := openTest(t)
	acceptAndDeliver(t, b, 300, bytes.Repeat([]byte("x"), 8<<10))
	// A flush maps a new table.
	if err := b.update(context.Background(), "flush", func(txn *badger.Txn) error { return txn.Set(reclaimKey, nil) }); err != nil {
		t.Fatal(err)
	}
	if err := b.commits.exclusive(func() error { return b.db.DropPrefix(reclaimKey) }); err != nil {
		t.Fatal(err)
	}

	dir := newMappedFiles(b.dir).dir
	deadline := time.Now().Add(5 * adviseInterval)
	for {
		maps := ledgerMapFlags(t, dir)
		var sst, vlog, random int
		for path, flags := range maps {
			switch filepath.Ext(path) {
			case ".sst":
				sst++
			case ".vlog":
				vlog++
			}
			if slices.Contains(flags, "rr") {
				random++
			}
		}
		if sst > 0 && vlog > 0 && random == len(maps) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %d of the maps of %d tables and %d value-log files are advised for random reads (VmFlags rr): %v",
				5*adviseInterval, random, sst, vlog, maps)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ledgerMapFlags reads /proc/self/smaps: the VmFlags of each map of a .sst or .vlog file in dir,
// by the map's start and path.
func ledgerMapFlags(t *testing.T, dir string) map[string][]string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := &mappedFiles{dir: dir}
	flags := map[string][]string{}
	var current string
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		line := lines.Text()
		if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			if current != "" {
				flags[current] = strings.Fields(rest)
			}
			current = ""
			continue
		}
		if _, _, ok := m.ledgerMap(line); ok {
			fields := strings.Fields(line)
			current = fields[0] + " " + fields[len(fields)-1]
		}
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	return flags
}
