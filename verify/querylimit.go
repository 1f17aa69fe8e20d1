package verify

import (
	"net/url"
	"os"
	"sort"
	"strings"
	"sync/atomic"
)

// url.ParseQuery refuses a query of more pairs than its limit: maxQueryParams, unless GODEBUG's
// urlmaxqueryparams sets another (0 for none), from the environment or the binary's defaults.
// The walkers refuse what it refuses, so they ask it, once per GODEBUG value.

// queryLimit is the most pairs, up to maxQueryParams, url.ParseQuery reads under one GODEBUG, and
// whether it reads more than maxQueryParams.
type queryLimit struct {
	godebug string
	pairs   int
	raised  bool
}

var currentQueryLimit atomic.Pointer[queryLimit]

// withinQueryLimit reports whether url.ParseQuery reads a query of pairs pairs.
func withinQueryLimit(pairs int) bool {
	limit := queryLimitNow()
	switch {
	case pairs <= limit.pairs:
		return true
	case !limit.raised:
		return false
	}
	return parseQueryReads(pairs) // a limit raised above the default: rare enough to ask each time
}

// queryLimitNow is url.ParseQuery's limit under the current GODEBUG.
func queryLimitNow() *queryLimit {
	godebug := os.Getenv("GODEBUG")
	limit := currentQueryLimit.Load()
	if limit == nil || limit.godebug != godebug {
		// The limit is monotone: every count up to it is read, none beyond.
		most := sort.Search(maxQueryParams, func(n int) bool { return !parseQueryReads(n + 1) })
		limit = &queryLimit{godebug: godebug, pairs: most, raised: most == maxQueryParams && parseQueryReads(maxQueryParams+1)}
		currentQueryLimit.Store(limit)
	}
	return limit
}

// formPairsBound is the most parameters parseForm keeps from a body of size bytes: each but the
// last takes a byte and a separator, and no more than url.ParseQuery reads.
func formPairsBound(size int64) int64 {
	pairs := size/2 + 1
	if limit := queryLimitNow(); !limit.raised {
		pairs = min(pairs, int64(limit.pairs))
	}
	return pairs
}

// parseQueryReads reports whether url.ParseQuery reads a query of pairs (empty) pairs.
func parseQueryReads(pairs int) bool {
	_, err := url.ParseQuery(strings.Repeat("&", pairs-1))
	return err == nil
}
