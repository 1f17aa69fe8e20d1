package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// memoryCgroup is a child of the bench's own memory cgroup that one Caddy runs in, capped the
// way a container at the edge would be. Caddy starts inside it and, like in a container, sets
// its Go memory limit (GOMEMLIMIT) to 90% of the cap. Under the cap the kernel reclaims the clean pages of
// Badger's mapped files rather than kill the process, so RSS then shows what the gateway
// really needs; the cap is met only if the run finishes with no OOM kill. Linux only, as root,
// cgroup v1 or v2.
type memoryCgroup struct {
	dir string
	v2  bool
}

// newMemoryCgroup creates a child cgroup capped at limit bytes; a process joins it by writing
// its pid to procsFile.
func newMemoryCgroup(limit int64) (*memoryCgroup, error) {
	parent, v2, err := ownMemoryCgroup()
	if err != nil {
		return nil, err
	}
	cg := &memoryCgroup{dir: filepath.Join(parent, fmt.Sprintf("hookgate-bench-%d-%d", os.Getpid(), time.Now().UnixNano())), v2: v2}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory cgroup: %w", err)
	}
	limitFile := "memory.limit_in_bytes"
	if v2 {
		limitFile = "memory.max"
		// Without swap a v2 cgroup reclaims or kills all the same; no swap.max to set.
	}
	if err := cg.write(limitFile, strconv.FormatInt(limit, 10)); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

func (cg *memoryCgroup) procsFile() string { return filepath.Join(cg.dir, "cgroup.procs") }

// ownMemoryCgroup finds the directory of this process's memory cgroup.
func ownMemoryCgroup() (dir string, v2 bool, err error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", false, fmt.Errorf("memory cgroup: %w", err)
	}
	defer f.Close()
	var unified string
	s := bufio.NewScanner(f)
	for s.Scan() {
		parts := strings.SplitN(s.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "memory" {
				return filepath.Join("/sys/fs/cgroup/memory", parts[2]), false, nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
	}
	if unified != "" {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			return filepath.Join("/sys/fs/cgroup", unified), true, nil
		}
	}
	return "", false, fmt.Errorf("memory cgroup: no memory controller in /proc/self/cgroup")
}

func (cg *memoryCgroup) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("memory cgroup: %w", err)
	}
	return nil
}

// peak is the highest memory use charged to the cgroup (anonymous memory and page cache), or
// -1 if unknown.
func (cg *memoryCgroup) peak() int64 {
	return cg.number(cg.file("memory.max_usage_in_bytes", "memory.peak"), "")
}

// oomKills is how many processes the kernel killed for going over the cap, or -1 if unknown.
func (cg *memoryCgroup) oomKills() int64 {
	return cg.number(cg.file("memory.oom_control", "memory.events"), "oom_kill")
}

// file picks the name of a control file by cgroup version.
func (cg *memoryCgroup) file(v1, v2 string) string {
	if cg.v2 {
		return v2
	}
	return v1
}

// number reads a control file holding one number (key "") or "key number" lines; -1 if absent.
func (cg *memoryCgroup) number(file, key string) int64 {
	raw, err := os.ReadFile(filepath.Join(cg.dir, file))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if key != "" {
			if len(f) != 2 || f[0] != key {
				continue
			}
			f = f[1:]
		}
		if len(f) != 1 {
			continue
		}
		if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			return n
		}
	}
	return -1
}

// remove deletes the cgroup once its process has exited (the kernel refuses before).
func (cg *memoryCgroup) remove() {
	_ = os.Remove(cg.dir)
}

// usage is ", cgroup anon N MiB, page cache N MiB, N major faults" from memory.stat, or "" without a
// cgroup: the cap's split between the heap and Badger's files, and how often a page came back
// from disk.
func (cg *memoryCgroup) usage() string {
	if cg == nil {
		return ""
	}
	anon, cache := cg.number("memory.stat", cg.file("total_rss", "anon")), cg.number("memory.stat", cg.file("total_cache", "file"))
	faults := cg.number("memory.stat", cg.file("total_pgmajfault", "pgmajfault"))
	return fmt.Sprintf(", cgroup anon %s MiB, page cache %s MiB, %d major faults", mib(anon), mib(cache), faults)
}
