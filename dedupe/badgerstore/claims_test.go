package badgerstore

import (
	"fmt"
	"testing"
	"time"
)

// Claims whose holders never came back are swept out when the table reaches minSweep (then twice
// the size a sweep left), so it does not grow with them.
func TestClaimTableSweepsLapsedClaims(t *testing.T) {
	var c claimTable
	now := time.Now()
	for i := range minSweep {
		if !c.take(fmt.Appendf(nil, "lapsed-%d", i), now, now.Add(time.Second)) {
			t.Fatal("a fresh key was refused")
		}
	}
	later := now.Add(2 * time.Second)
	if !c.take([]byte("fresh"), later, later.Add(time.Second)) || c.take([]byte("fresh"), later, later.Add(time.Second)) {
		t.Error("a live claim must be taken exactly once")
	}
	if !c.take([]byte("lapsed-0"), later, later.Add(time.Second)) {
		t.Error("a lapsed claim was not taken over")
	}
	if n := len(c.leases); n != 2 {
		t.Errorf("%d claims left after a sweep, want the 2 live ones", n)
	}
}
