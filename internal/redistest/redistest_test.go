package redistest

import (
	"strings"
	"testing"
)

func TestServerKeepsWhatItAcknowledgedAcrossAKill(t *testing.T) {
	s, err := Start(t.TempDir(), Durable...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	if _, err := s.Command("set", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Command("get", "k"); err != nil || got != "v" {
		t.Fatalf("after kill -9 and restart: %q, %v; want v", got, err)
	}
}

func TestClusterOfThreeMasters(t *testing.T) {
	c, err := StartCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	info, err := c.Nodes[0].Command("cluster", "info")
	if err != nil || !strings.Contains(info, "cluster_known_nodes:3") {
		t.Fatalf("cluster info: %v\n%s", err, info)
	}
}

// Tests that pick ports in parallel and bind them later (a Caddy process takes seconds to start)
// never get one port twice from FreePort, though each is free again the moment it is handed out.
func TestFreePortNeverHandsOutAPortTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 3000 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice in %d calls", port, len(seen)+1)
		}
		seen[port] = true
	}
}

func TestDurableClusterFsyncsEveryWriteOnEveryNode(t *testing.T) {
	c := DurableCluster(t)
	for _, n := range c.Nodes {
		for setting, want := range map[string]string{"appendonly": "yes", "appendfsync": "always"} {
			if got, err := n.Command("config", "get", setting); err != nil || !strings.HasSuffix(got, want) {
				t.Fatalf("node %s %s: %q, %v; want %s", n.Addr, setting, got, err, want)
			}
		}
		if info, err := n.Command("cluster", "info"); err != nil || !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("node %s cluster info: %v\n%s", n.Addr, err, info)
		}
	}
}
