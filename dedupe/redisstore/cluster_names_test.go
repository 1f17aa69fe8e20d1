package redisstore

import (
	"bytes"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/internal/redistest"
)

// Routes whose names hold '@', ':', '{', '}' and '%' keep all their destinations' keys in one
// slot on a Cluster: DoneAndQueue and Accept for three destinations, then leases, updates (dead,
// delivered), a replay and gets in every queue, from two nodes, each succeed with the body.
func TestOddRouteNamesOnAClusterForSeveralDestinations(t *testing.T) {
	cluster := redistest.DurableCluster(t)
	newClient := func() redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs()})
	}
	prefix := "p{x}:y@" + newPrefix()
	a, b := New(newClient(), prefix), New(newClient(), prefix)
	t.Cleanup(func() { a.Close(); b.Close() })
	names := []string{dedupe.DefaultDestination, "billing", "analytics"}
	for _, route := range []string{"a}:@b{c%", "}{", "x@billing", "r:@billing:e:", "{route}", "%7B"} {
		for i, op := range []string{"doneandqueue", "accept"} {
			c := dedupe.Claim{Namespace: route, ID: "evt_" + op, Lease: time.Minute}
			for _, n := range names {
				c.Destinations = append(c.Destinations, dedupe.Destination{Name: n})
			}
			ev := queued(c.ID, base)
			ev.Namespace = route
			ev.Body = []byte(`{"route":"` + route + `","op":"` + op + `"}`)
			if i == 0 {
				if out, err := a.Claim(ctx, c); err != nil || out != dedupe.Claimed {
					t.Fatalf("%q: claim: %v %v", route, out, err)
				}
				if err := a.DoneAndQueue(ctx, c, ev, time.Hour); err != nil {
					t.Fatalf("%q: doneandqueue: %v", route, err)
				}
			} else if out, err := b.Accept(ctx, c, ev, time.Hour); err != nil || out != dedupe.Claimed {
				t.Fatalf("%q: accept: %v %v", route, out, err)
			}
			for j, n := range names {
				q := dedupe.QueueNamespace(route, n)
				node, other := a, b
				if j%2 == 1 {
					node, other = b, a
				}
				evs, err := node.Lease(ctx, q, base.Add(time.Hour), 10, time.Minute)
				if err != nil || len(evs) != 1 || !bytes.Equal(evs[0].Body, ev.Body) {
					t.Fatalf("%q %s %s: lease: %v %v", route, op, n, evs, err)
				}
				got := evs[0]
				got.State = dedupe.Dead
				if err := other.Update(ctx, got, time.Hour); err != nil {
					t.Fatalf("%q %s %s: update: %v", route, op, n, err)
				}
				if err := node.Replay(ctx, q, got.ID, base.Add(time.Hour)); err != nil {
					t.Fatalf("%q %s %s: replay: %v", route, op, n, err)
				}
				evs, err = other.Lease(ctx, q, base.Add(2*time.Hour), 10, time.Minute)
				if err != nil || len(evs) != 1 || !bytes.Equal(evs[0].Body, ev.Body) {
					t.Fatalf("%q %s %s: lease after replay: %v %v", route, op, n, evs, err)
				}
				evs[0].State = dedupe.Delivered
				if err := node.Update(ctx, evs[0], time.Hour); err != nil {
					t.Fatalf("%q %s %s: delivered: %v", route, op, n, err)
				}
				if g, err := node.Get(ctx, q, got.ID); err != nil || g.State != dedupe.Delivered {
					t.Fatalf("%q %s %s: get: %v %v", route, op, n, g, err)
				}
			}
		}
	}
}
