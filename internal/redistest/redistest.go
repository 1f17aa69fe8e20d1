// Package redistest starts real redis-server processes for tests and benchmarks: each on its own
// loopback port with its own data directory, never the system service. Debian's redis-server and
// redis-cli must be installed (./xcaddy.sh test installs them when missing).
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Durable is the persistence that keeps every acknowledged write: an fsync of the append-only
// file before each reply.
var Durable = []string{"appendonly yes", "appendfsync always"}

// Server is one redis-server process.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// Dir is the server's working directory: its config, log, AOF and RDB files.
	Dir string
	cmd *exec.Cmd
}

// Start starts a redis-server in dir (created if missing) on a free loopback port, with the given
// extra config lines (e.g. Durable), and waits until it answers PING.
func Start(dir string, config ...string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return startOn(dir, port, config)
}

func startOn(dir string, port int, config []string) (*Server, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errors.New("redis-server is not installed: ./xcaddy.sh test installs it (apt-get install -y redis-server)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := append([]string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(port),
		"dir " + dir,
		"logfile " + filepath.Join(dir, "redis.log"),
		"save \"\"",
		"protected-mode yes",
		"daemonize no",
	}, config...)
	confFile := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(confFile, []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", confFile)
	// Never outlive the test. Linux sends Pdeathsig when the forking *thread* exits, and Go ends
	// a thread only when a goroutine that locked it (runtime.LockOSThread) returns: a test that
	// locks its thread kills every server forked from that thread, others' included. Don't.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: dir, cmd: cmd}
	if err := s.waitReady(10 * time.Second); err != nil {
		s.Kill()
		return nil, err
	}
	return s, nil
}

// Pid is the running server's process ID (0 when it is stopped).
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Command runs one command on the server with redis-cli and returns its output.
func (s *Server) Command(args ...string) (string, error) {
	host, port, _ := net.SplitHostPort(s.Addr)
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("redis-cli %v: %w: %s", args, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func (s *Server) waitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if reply, err := ping(s.Addr); err == nil && reply == "+PONG" {
			return nil
		} else if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			return fmt.Errorf("redis-server on %s did not answer PING within %v (last: %v %q); its log:\n%s", s.Addr, within, err, reply, tail(log))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the server down cleanly (it writes its AOF) and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}

// Kill stops the server with SIGKILL, as a crash would: what it had not written is lost.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the stopped or killed server again on the same port and directory, with its
// config file as written, so it loads what it persisted.
func (s *Server) Restart() error {
	if s.cmd != nil {
		return errors.New("redistest: server still running")
	}
	cmd := exec.Command("redis-server", filepath.Join(s.Dir, "redis.conf"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restarting redis-server: %w", err)
	}
	s.cmd = cmd
	return s.waitReady(30 * time.Second)
}

// Cluster is a Redis Cluster of masters only (no replicas), each a Server.
type Cluster struct {
	Nodes []*Server
}

// Addrs are the masters' addresses, as a cluster client's seeds.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// StartCluster starts masters servers under dir (cluster-enabled, with the given extra config),
// joins them as `redis-cli --cluster create` does, and waits until every node reports the cluster
// ok. Each node's cluster bus port is its port + 10000, so ports are picked below 55535. The
// node timeout is 30 s: a durable node's fsync can stall for seconds on a busy disk, and with 5 s
// its peers voted it down and the whole cluster answered CLUSTERDOWN; no test waits on a failover.
func StartCluster(dir string, masters int, config ...string) (*Cluster, error) {
	c := &Cluster{}
	for i := range masters {
		port, err := freeClusterPort()
		if err != nil {
			c.Stop()
			return nil, err
		}
		node, err := startOn(filepath.Join(dir, fmt.Sprintf("node%d", i)), port,
			append([]string{"cluster-enabled yes", "cluster-config-file nodes.conf", "cluster-node-timeout 30000"}, config...))
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	if err := c.join(); err != nil {
		c.Stop()
		return nil, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for {
			info, err := n.Command("cluster", "info")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Stop()
				return nil, fmt.Errorf("cluster node %s not ok within 30s: %v %s", n.Addr, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c, nil
}

// Run starts a server for t under its temporary directory with config's extra lines, and kills
// it when t ends. It fails t if the server does not start.
func Run(t testing.TB, config ...string) *Server {
	t.Helper()
	srv, err := Start(filepath.Join(t.TempDir(), "redis"), config...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Kill)
	return srv
}

// DurableCluster starts a 3-master Cluster for t under its temporary directory, each node Durable
// (an fsync before each reply), waits until every node reports the cluster ok, and stops it when
// t ends. It fails t if the cluster does not start.
func DurableCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := StartCluster(filepath.Join(t.TempDir(), "cluster"), 3, Durable...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// join does what `redis-cli --cluster create --cluster-replicas 0` does, without its fixed
// seconds of sleep: it splits the slots into equal ranges as redis-cli does, gives each master its
// range and a config epoch of its own, and has the first node meet the others (gossip tells them
// of each other).
func (c *Cluster) join() error {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return errors.New("redis-cli is not installed: ./xcaddy.sh test installs it (apt-get install -y redis-tools)")
	}
	const slots = 16384
	perNode := float64(slots) / float64(len(c.Nodes))
	first := 0
	for i, n := range c.Nodes {
		last := int(math.Round(float64(i)*perNode + perNode - 1))
		if last > slots-1 || i == len(c.Nodes)-1 {
			last = slots - 1
		}
		last = max(last, first)
		if err := n.ok("cluster", "addslotsrange", strconv.Itoa(first), strconv.Itoa(last)); err != nil {
			return err
		}
		if err := n.ok("cluster", "set-config-epoch", strconv.Itoa(i+1)); err != nil {
			return err
		}
		first = last + 1
	}
	for _, n := range c.Nodes[1:] {
		host, port, _ := net.SplitHostPort(n.Addr)
		if err := c.Nodes[0].ok("cluster", "meet", host, port); err != nil {
			return err
		}
	}
	return nil
}

// ok runs one command that must answer OK.
func (s *Server) ok(args ...string) error {
	out, err := s.Command(args...)
	if err != nil {
		return err
	}
	if out != "OK" {
		return fmt.Errorf("redis-cli %v on %s: %s", args, s.Addr, out)
	}
	return nil
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// handedOut are the ports FreePort and freeClusterPort gave out (cluster bus ports included):
// tests that start servers in parallel must not get one port twice in the moment before its
// server binds it.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// handOut marks ports given out; false if one of them was already.
func handOut(ports ...int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	for _, p := range ports {
		if handedOut.ports[p] {
			return false
		}
	}
	for _, p := range ports {
		handedOut.ports[p] = true
	}
	return true
}

// FreePort is a port on 127.0.0.1 that no socket uses now and that this process has not handed
// out before (to a Redis server, a cluster bus, or a caller such as a Caddy started by a test):
// parallel tests that pick a port and bind it later must not get the same one.
func FreePort() (int, error) {
	for range 100 {
		port, err := unusedPort()
		if err != nil {
			return 0, err
		}
		if handOut(port) {
			return port, nil
		}
	}
	return 0, errors.New("no free port not given out already")
}

// unusedPort is a port no socket on 127.0.0.1 uses now.
func unusedPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freeClusterPort is a free port whose cluster bus port (+10000) is free too.
func freeClusterPort() (int, error) {
	for range 100 {
		port, err := unusedPort()
		if err != nil {
			return 0, err
		}
		if port+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		if err != nil {
			continue
		}
		bus.Close()
		if handOut(port, port+10000) {
			return port, nil
		}
	}
	return 0, errors.New("no free port pair for a cluster node")
}

// ping sends PING over a raw connection, so this package needs no client library.
func ping(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
