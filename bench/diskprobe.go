package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// syncProbeWrites is how many small synced writes the disk probe times: enough for a p99.
const syncProbeWrites = 200

// probeSync times what a synced ledger write waits on the disk alone: 4 KiB appended to a file in
// dir and fdatasync'd, syncProbeWrites times. It runs in the Caddy's own directory, on the
// ledger's filesystem, just before the load, so the tail-latency targets compare each config's
// p99 with the disk's sync p99 of the same minute.
func probeSync(dir string) (p50, p99 time.Duration, err error) {
	f, err := os.CreateTemp(dir, "sync-probe-")
	if err != nil {
		return 0, 0, fmt.Errorf("disk probe: %w", err)
	}
	defer os.Remove(filepath.Clean(f.Name()))
	defer f.Close()
	block := make([]byte, 4096)
	took := make([]time.Duration, syncProbeWrites)
	for i := range took {
		start := time.Now()
		if _, err := f.Write(block); err != nil {
			return 0, 0, fmt.Errorf("disk probe: %w", err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, 0, fmt.Errorf("disk probe: %w", err)
		}
		took[i] = time.Since(start)
	}
	slices.Sort(took)
	return took[len(took)/2], took[len(took)*99/100], nil
}
