package redisstore

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// Concurrent Accepts in many namespaces through the Cluster client's auto-pipeliner, while one
// namespace's slot migrates key by key to another master: every Accept answered Claimed must be
// stored whole (Get finds it with its body), each namespace's keys on the master owning its slot.
func TestClusterAutoPipelineRoutesEachNamespace(t *testing.T) {
	t.Parallel()
	c := redistest.DurableCluster(t)
	s := New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRedirects: 3}), "hg")
	t.Cleanup(func() { s.Close() })
	const namespaces = 12
	var (
		mu       sync.Mutex
		answered = map[[2]string]dedupe.Outcome{}
		perNS    = map[string]int{}
		errs     = map[string]int{}
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	for w := 0; w < 48; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				n := fmt.Sprintf("ns%d", (w+i)%namespaces)
				id := fmt.Sprintf("w%d-%d", w, i)
				ev := queued(id, base)
				ev.Namespace = n
				out, err := s.Accept(ctx, dedupe.Claim{Namespace: n, ID: id, Lease: time.Minute}, ev, time.Hour)
				mu.Lock()
				if err != nil {
					msg := err.Error()
					errs[msg[:min(len(msg), 60)]]++
				} else {
					answered[[2]string{n, id}] = out
					perNS[n]++
				}
				mu.Unlock()
			}
		}()
	}
	// Every namespace must answer at least answerFloor Accepts before the reshard and ns0 as many
	// again after it: a run in which Accepts fail keeps nothing and must not pass. A normal run
	// answers hundreds per namespace; the floor is a small fraction a loaded machine always meets.
	const answerFloor = 20
	answeredAtLeast := func(phase string, want map[string]int) {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			short := map[string]int{}
			for n, w := range want {
				if perNS[n] < w {
					short[n] = perNS[n]
				}
			}
			mu.Unlock()
			if len(short) == 0 {
				return
			}
			if time.Now().After(deadline) {
				stop.Store(true)
				wg.Wait()
				t.Fatalf("%s: namespaces below their floor of answered Accepts (answered so far): %v; errors %v", phase, short, errs)
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	floor := map[string]int{}
	for i := 0; i < namespaces; i++ {
		floor[fmt.Sprintf("ns%d", i)] = answerFloor
	}
	answeredAtLeast("before the reshard", floor)
	// Move ns0's slot to another master, as redis-cli --cluster reshard does.
	tag, _ := s.tag("ns0")
	slot := clusterCmd(t, c.Nodes[0], "cluster", "keyslot", tag)
	var src, dst *redistest.Server
	for _, n := range c.Nodes {
		if keys := clusterCmd(t, n, "cluster", "countkeysinslot", slot); keys != "0" {
			src = n
		} else if dst == nil {
			dst = n
		}
	}
	if src == nil || dst == nil {
		t.Fatalf("ns0's slot %s: no node holds its keys (%v) or none is free to receive it (%v)", slot, src, dst)
	}
	srcID, dstID := clusterCmd(t, src, "cluster", "myid"), clusterCmd(t, dst, "cluster", "myid")
	clusterCmd(t, dst, "cluster", "setslot", slot, "importing", srcID)
	clusterCmd(t, src, "cluster", "setslot", slot, "migrating", dstID)
	host, port, _ := net.SplitHostPort(dst.Addr)
	for {
		keys := strings.Fields(clusterCmd(t, src, "cluster", "getkeysinslot", slot, "20"))
		if len(keys) == 0 {
			break
		}
		clusterCmd(t, src, append([]string{"migrate", host, port, "", "0", "5000", "keys"}, keys...)...)
		time.Sleep(20 * time.Millisecond)
	}
	for _, n := range c.Nodes {
		clusterCmd(t, n, "cluster", "setslot", slot, "node", dstID)
	}
	mu.Lock()
	after := map[string]int{"ns0": perNS["ns0"] + answerFloor}
	mu.Unlock()
	answeredAtLeast("after the reshard", after)
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	lost := 0
	for k, out := range answered {
		ev, err := s.Get(ctx, k[0], k[1])
		switch {
		case errors.Is(err, dedupe.ErrNotFound):
			lost++
			if lost < 5 {
				t.Errorf("%s/%s answered %v, not in Redis", k[0], k[1], out)
			}
		case err != nil:
			t.Fatalf("Get %v: %v", k, err)
		case string(ev.Body) != `{"id":"`+k[1]+`"}`:
			t.Errorf("%v holds %s", k, ev.Body)
		}
	}
	total := 0
	for i := 0; i < namespaces; i++ {
		p, err := s.Pending(ctx, fmt.Sprintf("ns%d", i))
		if err != nil {
			t.Fatal(err)
		}
		total += p
	}
	t.Logf("answered %d, pending %d, errors %v, lost %d", len(answered), total, errs, lost)
	if total != len(answered) {
		t.Errorf("namespaces count %d pending, %d accepted", total, len(answered))
	}
}
