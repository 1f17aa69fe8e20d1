package badgerstore

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probePattern names the file readAround maps, in the ledger's directory,
// where Badger ignores it.
const probePattern = "readahead-*.probe"

// probeSize is the size of the file readAround maps: twice a table, so a
// fault in its middle can read a table's worth either side.
const probeSize = 2 << 20

// readAround measures how much one fault in a map of a file in dir reads
// into the page cache: it writes a file there, drops it from the page cache,
// maps it, reads one byte in its middle and counts the pages now in memory.
// That is a lower bound: mincore counts the pages whose read has completed,
// and the fault returns once its own page is in, the part before it with it
// (the kernel reads around a fault from before it), so a readahead above the
// default always measures above it. It returns 0 where the file cannot be
// dropped from memory (tmpfs), which has nothing to read. It first removes
// the probes of a process that died while measuring: Open holds the
// directory's lock, so no other probe is in flight.
func readAround(dir string) (int, error) {
	leftovers, _ := filepath.Glob(filepath.Join(dir, probePattern))
	for _, path := range leftovers {
		_ = os.Remove(path)
	}
	f, err := os.CreateTemp(dir, probePattern)
	if err != nil {
		return 0, fmt.Errorf("probing it: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(make([]byte, probeSize)); err != nil {
		return 0, fmt.Errorf("probing it: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("probing it: %w", err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return 0, fmt.Errorf("probing it: %w", err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, probeSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("probing it: %w", err)
	}
	defer unix.Munmap(data)
	before, err := residentPages(data)
	if err != nil || before > 0 {
		return 0, err
	}
	_ = readByte(data, probeSize/2)
	after, err := residentPages(data)
	return after * os.Getpagesize(), err
}

// readByte reads data[i] where the compiler cannot leave it out.
//
//go:noinline
func readByte(data []byte, i int) byte { return data[i] }

// residentPages counts the pages of a map that are in memory (mincore).
func residentPages(data []byte) (int, error) {
	page := os.Getpagesize()
	vec := make([]byte, (len(data)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(data))), uintptr(len(data)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if errno != 0 {
		return 0, fmt.Errorf("probing it: mincore: %w", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, nil
}

// mappedFiles finds this process's maps of the ledger's files in one
// directory and advises random reads on each once (readahead.go).
type mappedFiles struct {
	// dir is the directory as the kernel names it in /proc/self/maps:
	// absolute, with symbolic links resolved.
	dir string
	// advised holds the maps already advised. A table deleted by a
	// compaction may leave its address and its inode to a new one (ext4
	// reuses inodes at once), but never its name: Badger numbers tables
	// without reuse.
	advised map[mapping]bool
}

type mapping struct {
	start uintptr
	inode uint64
	path  string
}

func newMappedFiles(dir string) *mappedFiles {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return &mappedFiles{dir: dir, advised: map[mapping]bool{}}
}

// adviseRandomReads advises MADV_RANDOM on every map of a table (.sst file)
// or value-log file (.vlog) in the directory that it has not advised yet.
func (m *mappedFiles) adviseRandomReads() error {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return fmt.Errorf("listing the process's maps: %w", err)
	}
	defer f.Close()
	seen := make(map[mapping]bool, len(m.advised))
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		mp, length, ok := m.ledgerMap(lines.Text())
		if !ok {
			continue
		}
		seen[mp] = true
		if m.advised[mp] {
			continue
		}
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, mp.start, length, unix.MADV_RANDOM)
		// ENOMEM: Badger unmapped the file since the list was read.
		if errno != 0 && !errors.Is(errno, unix.ENOMEM) {
			return fmt.Errorf("advising random reads of a ledger file: %w", errno)
		}
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("listing the process's maps: %w", err)
	}
	m.advised = seen
	return nil
}

// ledgerMap parses a line of /proc/self/maps ("start-end perms offset dev
// inode path") and reports whether it maps a table or a value-log file in
// the directory.
func (m *mappedFiles) ledgerMap(line string) (mapping, uintptr, bool) {
	var fields [5]string
	rest := line
	for i := range fields {
		var ok bool
		if fields[i], rest, ok = strings.Cut(strings.TrimLeft(rest, " "), " "); !ok {
			return mapping{}, 0, false // a map of no file
		}
	}
	path := strings.TrimLeft(rest, " ")
	if filepath.Dir(path) != m.dir || (filepath.Ext(path) != ".sst" && filepath.Ext(path) != ".vlog") {
		return mapping{}, 0, false // not the ledger's, or deleted: "path (deleted)"
	}
	startHex, endHex, _ := strings.Cut(fields[0], "-")
	start, err1 := strconv.ParseUint(startHex, 16, 64)
	end, err2 := strconv.ParseUint(endHex, 16, 64)
	inode, err3 := strconv.ParseUint(fields[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || end <= start {
		return mapping{}, 0, false
	}
	return mapping{start: uintptr(start), inode: inode, path: path}, uintptr(end - start), true
}
