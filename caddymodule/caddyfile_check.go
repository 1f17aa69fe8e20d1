package caddymodule

import (
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/hookgate/hookgate/verify"
)

// A word from a closed set (a preset, an encoding, a subdirective's name) is checked as the
// Caddyfile is read, so that a typo is refused with its file and line, and the word it most
// likely meant, when the Caddyfile is adapted, rather than when the config loads, at the end of
// Caddy's chain of modules.

// closedSets are the values of the scalar subdirectives that name one of a few choices.
var closedSets = map[string][]string{
	"preset":           verify.PresetNames(),
	"signature_format": verify.Formats,
	"encoding":         verify.Encodings,
	"algorithm":        verify.Algorithms,
	"secret_encoding":  verify.SecretEncodings,
	"timestamp_unit":   verify.TimestampUnits,
}

// checkChoice refuses a value of what (a subdirective, or its argument) outside allowed. A preset
// is named in any letter case, as verify.Preset takes it.
func checkChoice(d *caddyfile.Dispenser, what, value string, allowed []string) error {
	if slices.Contains(allowed, value) || what == "preset" && slices.Contains(allowed, strings.ToLower(value)) {
		return nil
	}
	if guess := nearest(value, allowed); guess != "" {
		return d.Errf("unknown %s %q: did you mean %q? (one of %s)", what, value, guess, strings.Join(allowed, ", "))
	}
	return d.Errf("unknown %s %q: use one of %s", what, value, strings.Join(allowed, ", "))
}

// unknownSubdirective refuses a subdirective of block that is not one of known.
func unknownSubdirective(d *caddyfile.Dispenser, block, sub string, known []string) error {
	if guess := nearest(sub, known); guess != "" {
		return d.Errf("unrecognized %s subdirective %q: did you mean %q?", block, sub, guess)
	}
	return d.Errf("unrecognized %s subdirective %q (one of %s)", block, sub, strings.Join(known, ", "))
}

// nearest is the choice a typo of value most likely meant: the closest within a third of its
// length in edits (at least one), or "" when none is that close.
func nearest(value string, choices []string) string {
	best, bestDistance := "", max(1, len(value)/3)+1
	for _, c := range choices {
		if d := editDistance(strings.ToLower(value), c); d < bestDistance {
			best, bestDistance = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			substitution := prev[j-1]
			if a[i-1] != b[j-1] {
				substitution++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, substitution)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
