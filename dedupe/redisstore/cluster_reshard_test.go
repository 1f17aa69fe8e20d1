package redisstore

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// Resharding a Cluster moves a namespace's slot from one master to another key by key (what
// `redis-cli --cluster reshard` does). Calls made meanwhile must not lose a queued event: a
// script that sees part of the namespace's keys (the queue moved, the event's hash not yet)
// must fail rather than act on the half it sees.
func TestReshardKeepsQueuedEvents(t *testing.T) {
	t.Parallel()
	c := redistest.DurableCluster(t)
	s := New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()}), "hg")
	t.Cleanup(func() { s.Close() })
	accept(t, s, versioned("e1", "order", 1), base)
	accept(t, s, claim("e2"), base)
	tag, _ := s.tag(ns)
	slot := clusterCmd(t, c.Nodes[0], "cluster", "keyslot", tag)
	var src, dst *redistest.Server
	for _, n := range c.Nodes {
		if keys := clusterCmd(t, n, "cluster", "countkeysinslot", slot); keys != "0" {
			src = n
		} else if dst == nil {
			dst = n
		}
	}
	srcID, dstID := clusterCmd(t, src, "cluster", "myid"), clusterCmd(t, dst, "cluster", "myid")
	clusterCmd(t, dst, "cluster", "setslot", slot, "importing", srcID)
	clusterCmd(t, src, "cluster", "setslot", slot, "migrating", dstID)
	host, port, _ := net.SplitHostPort(dst.Addr)
	clusterCmd(t, src, "migrate", host, port, tag+"q", "0", "5000") // the queue moves first

	evs, leaseErr := s.Lease(ctx, ns, base.Add(time.Minute), 10, time.Minute)
	t.Logf("Lease mid-migration: %v, %v", ids(evs), leaseErr)
	// Finish the migration, as redis-cli does.
	for {
		keys := strings.Fields(clusterCmd(t, src, "cluster", "getkeysinslot", slot, "100"))
		if len(keys) == 0 {
			break
		}
		clusterCmd(t, src, append([]string{"migrate", host, port, "", "0", "5000", "keys"}, keys...)...)
	}
	for _, n := range c.Nodes {
		clusterCmd(t, n, "cluster", "setslot", slot, "node", dstID)
	}
	time.Sleep(500 * time.Millisecond)
	got := map[string]bool{}
	for _, ev := range evs {
		got[ev.ID] = true
	}
	for round := 0; round < 3 && len(got) < 2; round++ {
		more, err := s.Lease(ctx, ns, base.Add(time.Duration(10+round)*time.Minute), 10, time.Minute)
		if err != nil {
			t.Fatalf("Lease after the migration: %v", err)
		}
		for _, ev := range more {
			got[ev.ID] = true
		}
	}
	if !got["e1"] || !got["e2"] {
		p, _ := s.Pending(ctx, ns)
		e1, err1 := s.Get(ctx, ns, "e1")
		e2, err2 := s.Get(ctx, ns, "e2")
		t.Fatalf("after a reshard, leasing for 13 minutes handed out %v of [e1 e2], the namespace counting %d pending (e1: %v %v, e2: %v %v): acknowledged events never delivered",
			got, p, state(e1), err1, state(e2), err2)
	}
}

func state(ev *dedupe.Event) dedupe.State {
	if ev == nil {
		return ""
	}
	return ev.State
}

func clusterCmd(t *testing.T, n *redistest.Server, args ...string) string {
	t.Helper()
	out, err := n.Command(args...)
	if err != nil || strings.HasPrefix(out, "ERR") || strings.HasPrefix(out, "(error)") {
		t.Fatalf("%s %v: %v %s", n.Addr, args, err, out)
	}
	return fmt.Sprint(out)
}
