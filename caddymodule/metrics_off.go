package caddymodule

import (
	"slices"
	"sync"
)

// commitsCounted tells whether the config in force counts: the Badger ledgers' commit observers
// (observeCommit) are set once, when a store opens, and a pooled store outlives the config
// that opened it, so they ask here rather than remember the `metrics off` of that config.
var commitsCounted = struct {
	sync.Mutex
	started []*App // the started configs' apps, in the order they started; the last is in force
	on      bool
}{on: true}

// startCounting puts a starting app's `metrics off` in force.
func startCounting(a *App) {
	commitsCounted.Lock()
	defer commitsCounted.Unlock()
	commitsCounted.started = append(commitsCounted.started, a)
	commitsCounted.on = !a.MetricsOff
}

// stopCounting lets go of a stopping app; if its setting was in force (a config that failed to
// start), the previous config's comes back.
func stopCounting(a *App) {
	commitsCounted.Lock()
	defer commitsCounted.Unlock()
	commitsCounted.started = slices.DeleteFunc(commitsCounted.started, func(o *App) bool { return o == a })
	if n := len(commitsCounted.started); n > 0 {
		commitsCounted.on = !commitsCounted.started[n-1].MetricsOff
	}
}

// countingCommits reports whether the config in force counts commits.
func countingCommits() bool {
	commitsCounted.Lock()
	defer commitsCounted.Unlock()
	return commitsCounted.on
}
