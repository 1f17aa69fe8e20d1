//go:build race

package verify

// raceEnabled is set when the race detector is on: it makes sync.Pool drop a quarter of what is
// put back, so allocation counts mean nothing then.
const raceEnabled = true
