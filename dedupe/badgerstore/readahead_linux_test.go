package badgerstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/scratchdisk"
)

// On a disk that reads 8 MiB around a fault, the value log and a table Badger maps while the
// store is open, as a flush makes one, are read at random: the kernel reads the page a lookup
// faults, not 8 MiB around it.
func TestLedgerFilesAreMappedForRandomReads(t *testing.T) {
	disk := scratchdisk.Mount(t, 64<<20)
	disk.SetReadAhead(t, 8192)
	b := openTestIn(t, disk.Dir)
	before := map[string][]string{}
	for flush := 1; flush <= 2; flush++ {
		acceptAndFlush(t, b, flush)
		deadline := time.Now().Add(5 * adviseInterval)
		for {
			maps := ledgerMapFlags(t, disk.Dir)
			random, mapped := 0, 0
			for m, flags := range maps {
				if slices.Contains(flags, "rr") {
					random++
				}
				if _, ok := before[m]; !ok {
					mapped++
				}
			}
			if mapped > 0 && random == len(maps) {
				before = maps
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("flush %d: after %v, %d of the maps of %d ledger files (%d new) are advised for random reads (VmFlags rr): %v",
					flush, 5*adviseInterval, random, len(maps), mapped, maps)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// On a disk with the kernel's default readahead (128 KiB), the ledger's files keep it: reading at
// random would cost them their place in the page cache (readahead.go).
func TestLedgerFilesKeepTheDefaultReadahead(t *testing.T) {
	disk := scratchdisk.Mount(t, 64<<20)
	disk.SetReadAhead(t, 128)
	if around, err := readAround(disk.Dir); err != nil || around != defaultReadAround {
		t.Fatalf("one fault read %d bytes (%v), want the readahead set, %d", around, err, defaultReadAround)
	}
	b := openTestIn(t, disk.Dir)
	acceptAndFlush(t, b, 1)
	time.Sleep(2 * adviseInterval) // as long as the adviser would take, were it running
	maps := ledgerMapFlags(t, disk.Dir)
	if len(maps) == 0 {
		t.Fatal("no table mapped after a flush: the test exercised nothing")
	}
	for key, flags := range maps {
		if slices.Contains(flags, "rr") {
			t.Errorf("%s is advised for random reads (VmFlags %v) on a disk with the default readahead", key, flags)
		}
	}
}

// acceptAndFlush accepts a hundred events and writes the memtable out as a new table.
func acceptAndFlush(t *testing.T, b *Store, round int) {
	t.Helper()
	for i := range 100 {
		ev := queued(fmt.Sprintf("round-%d-evt-%03d", round, i), base)
		if _, err := b.Accept(context.Background(), dedupe.Claim{Namespace: ev.Namespace}, ev, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	flushMemtable(t, b)
}

// flushMemtable writes the memtable out as a table, as Reclaim does.
func flushMemtable(t *testing.T, b *Store) {
	t.Helper()
	if err := b.update(context.Background(), "flush", func(txn *badger.Txn) error { return txn.Set(reclaimKey, nil) }); err != nil {
		t.Fatal(err)
	}
	if err := b.commits.exclusive(func() error { return b.db.DropPrefix(reclaimKey) }); err != nil {
		t.Fatal(err)
	}
}

// ledgerMapFlags reads /proc/self/smaps: the VmFlags of each map of a table or value-log file in
// dir, by the map's start and path.
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

// Only the maps of the store's own tables and value-log files are advised: not its memtables'
// write-ahead logs, not a file of another directory, not one deleted since.
func TestOnlyTheStoresLedgerFilesAreAdvised(t *testing.T) {
	m := &mappedFiles{dir: "/var/lib/caddy/hook gate"}
	for line, want := range map[string]string{
		"7f3b6c005000-7f3b6c014000 r--s 00000000 fe:01 1234 /var/lib/caddy/hook gate/000002.sst":           "/var/lib/caddy/hook gate/000002.sst",
		"7f3b6c005000-7f3b6c014000 r--s 00000000 fe:01 1234      /var/lib/caddy/hook gate/000002.sst":      "/var/lib/caddy/hook gate/000002.sst",
		"7f3b6c005000-7f3b6c014000 rw-s 00000000 fe:01 1234 /var/lib/caddy/hook gate/000001.vlog":          "/var/lib/caddy/hook gate/000001.vlog",
		"7f3b6c005000-7f3b6c014000 rw-s 00000000 fe:01 1234 /var/lib/caddy/hook gate/00001.mem":            "",
		"7f3b6c005000-7f3b6c014000 r--s 00000000 fe:01 1234 /var/lib/caddy/other/000002.sst":               "",
		"7f3b6c005000-7f3b6c014000 r--s 00000000 fe:01 1234 /var/lib/caddy/hook gate/000003.sst (deleted)": "",
		"7f3b6c005000-7f3b6c014000 rw-p 00000000 00:00 0 ":                                                 "",
		"7f3b6c005000-7f3b6c014000 rw-p 00000000 00:00 0":                                                  "",
	} {
		mp, length, ok := m.ledgerMap(line)
		if ok != (want != "") {
			t.Errorf("ledgerMap(%q) = %v, want %v", line, ok, want != "")
		}
		if ok && (mp != mapping{start: 0x7f3b6c005000, inode: 1234, path: want} || length != 0xf000) {
			t.Errorf("ledgerMap(%q) = %+v, %#x", line, mp, length)
		}
	}
}

// A compaction deletes tables and maps new ones, and the kernel may give a new table the address
// and the inode of one it deleted: the new one is advised all the same.
func TestATableMappedWhereADeletedOneWasIsAdvised(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "000002.sst")
	if err := os.WriteFile(path, make([]byte, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table, err := unix.Mmap(int(f.Fd()), 0, 64<<10, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(table)

	m := newMappedFiles(dir)
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for line := range strings.Lines(string(maps)) {
		line = strings.TrimSuffix(line, "\n")
		if _, _, ok := m.ledgerMap(line); ok {
			// The deleted table 000001.sst was advised at this address, with this inode.
			deleted, _, _ := m.ledgerMap(strings.Replace(line, "000002.sst", "000001.sst", 1))
			m.advised[deleted] = true
			found = true
		}
	}
	if !found {
		t.Fatalf("no map of %s in /proc/self/maps", path)
	}
	if err := m.adviseRandomReads(); err != nil {
		t.Fatal(err)
	}
	for key, flags := range ledgerMapFlags(t, m.dir) {
		if !slices.Contains(flags, "rr") {
			t.Fatalf("%s is not advised for random reads (VmFlags %v)", key, flags)
		}
	}
}

// A probe file left by a process that died while measuring the readahead is removed when the
// store next opens: it would take 2 MiB of the ledger's disk for good.
func TestAProbeLeftByACrashIsRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	left := filepath.Join(dir, "readahead-123.probe")
	if err := os.WriteFile(left, make([]byte, probeSize), 0o600); err != nil {
		t.Fatal(err)
	}
	openTestIn(t, dir)
	if probes, _ := filepath.Glob(filepath.Join(dir, "*.probe")); len(probes) > 0 {
		t.Fatalf("probe files in the ledger's directory after Open: %v", probes)
	}
}
