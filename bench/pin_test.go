package main

import (
	"slices"
	"testing"
)

func TestParseCPUListReadsTasksetLists(t *testing.T) {
	for in, want := range map[string][]int{"0": {0}, "0-1": {0, 1}, "3,0-1": {0, 1, 3}, "1,1": {1}} {
		if got, err := parseCPUList(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a", "2-1", "-1", "0,"} {
		if got, err := parseCPUList(in); err == nil {
			t.Errorf("parseCPUList(%q) = %v, want an error", in, got)
		}
	}
}
