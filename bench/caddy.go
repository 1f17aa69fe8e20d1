package main

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// caddyfileTemplate is every bench config: admin and the one site on free loopback ports, the
// config's global options (none but for the metrics pair) and the site's handlers in between.
// Nothing else is changed from Caddy's defaults.
const caddyfileTemplate = `{
	admin 127.0.0.1:%d
	persist_config off
	auto_https off
%s}

http://127.0.0.1:%d {
	bind 127.0.0.1
%s
}
`

// caddyProcess is one `caddy run` of a generated Caddyfile, with its own temporary
// XDG_DATA_HOME (so its own hookgate ledger), site port and admin port.
type caddyProcess struct {
	root      string // temp dir: Caddyfile, caddy.log, data/
	dataHome  string
	sitePort  int
	adminPort int
	cmd       *exec.Cmd
	exited    chan struct{}
}

// startCaddy writes a Caddyfile with handlers as the site's body, starts bin on it and waits
// until the site accepts connections. With a cgroup, Caddy starts inside it, as in a container,
// so that it sets its Go memory limit from the cgroup's cap at start, as Caddy does. With pin, it
// runs on the pinned CPUs alone (and Go sizes GOMAXPROCS to them).
func startCaddy(bin, globals, handlers string, cgroup *memoryCgroup, pin *pinning) (*caddyProcess, error) {
	root, err := os.MkdirTemp("", "hookgate-bench-")
	if err != nil {
		return nil, err
	}
	p := &caddyProcess{root: root, dataHome: filepath.Join(root, "data"), exited: make(chan struct{})}
	if p.sitePort, err = freePort(); err == nil {
		p.adminPort, err = freePort()
	}
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	config := filepath.Join(root, "Caddyfile")
	if globals != "" {
		globals = indent(globals) + "\n"
	}
	body := fmt.Sprintf(caddyfileTemplate, p.adminPort, globals, p.sitePort, indent(handlers))
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(root, "caddy.log"))
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	args := pin.command([]string{bin, "run", "--config", config, "--adapter", "caddyfile"})
	env := append(os.Environ(), "XDG_DATA_HOME="+p.dataHome, "XDG_CONFIG_HOME="+p.dataHome)
	if cgroup != nil {
		// The shell joins the cgroup, then becomes Caddy: same pid.
		args = append([]string{"sh", "-c", `echo $$ > "$HOOKGATE_BENCH_CGROUP_PROCS" && exec "$@"`, "sh"}, args...)
		env = append(env, "HOOKGATE_BENCH_CGROUP_PROCS="+cgroup.procsFile())
	}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		os.RemoveAll(root)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { _ = p.cmd.Wait(); logFile.Close(); close(p.exited) }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.exited:
			err := fmt.Errorf("caddy exited at start:\n%s", p.logTail(20))
			os.RemoveAll(root)
			return nil, err
		default:
		}
		if c, err := net.Dial("tcp", p.siteAddr()); err == nil {
			c.Close()
			return p, nil
		}
	}
	p.stop()
	return nil, fmt.Errorf("caddy did not listen within 20s:\n%s", p.logTail(20))
}

// siteAddr is the site's host:port.
func (p *caddyProcess) siteAddr() string { return fmt.Sprintf("127.0.0.1:%d", p.sitePort) }

// ledgerDir is where hookgate keeps its Badger store by default (Caddy's data dir).
func (p *caddyProcess) ledgerDir() string { return filepath.Join(p.dataHome, "caddy", "hookgate") }

// memory reads a field of /proc/<pid>/status (VmRSS, VmHWM) in bytes.
func (p *caddyProcess) memory(field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		name, value, ok := strings.Cut(scanner.Text(), ":")
		if !ok || name != field {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		return kib << 10, err
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", field, p.cmd.Process.Pid)
}

// mustMemory is memory, or -1 when it cannot be read (the process died).
func (p *caddyProcess) mustMemory(field string) int64 {
	n, err := p.memory(field)
	if err != nil {
		return -1
	}
	return n
}

// residentSet is the process's resident memory: all of it (VmRSS) and the anonymous part
// (RssAnon: heap, stacks). The rest is mostly file pages Badger maps (memtables, tables, value
// log), which the kernel can drop under pressure.
type residentSet struct{ total, anon int64 }

// rss reads the process's resident memory; unknown sizes are -1.
func (p *caddyProcess) rss() residentSet {
	return residentSet{total: p.mustMemory("VmRSS"), anon: p.mustMemory("RssAnon")}
}

// String is "VmRSS (anon RssAnon)" in MiB.
func (r residentSet) String() string { return mib(r.total) + " (anon " + mib(r.anon) + ")" }

// cpuTime is the CPU time (user + system) the process has used so far, from /proc/<pid>/stat.
func (p *caddyProcess) cpuTime() time.Duration { return processCPUTime(p.cmd.Process.Pid) }

// processCPUTime is the CPU time (user and system) process pid has used so far; 0 if unknown.
func processCPUTime(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the ")" that closes the command name: state is field 3, utime 14, stime 15.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// selfCPUTime is the CPU time this bench process (client and sink) has used so far.
func selfCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuProfile asks Caddy's admin endpoint for a CPU profile of the next d and writes it to path.
func (p *caddyProcess) cpuProfile(d time.Duration, path string) error {
	return p.savePprof(fmt.Sprintf("profile?seconds=%d", max(int(d.Seconds()), 1)), d, path)
}

// heapProfile saves Caddy's heap profile (in-use and allocated) to path.
func (p *caddyProcess) heapProfile(path string) error {
	return p.savePprof("heap", 0, path)
}

// savePprof fetches /debug/pprof/<query> from the admin endpoint into path; d is how long the
// profile itself takes.
func (p *caddyProcess) savePprof(query string, d time.Duration, path string) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", p.adminPort, query)
	resp, err := (&http.Client{Timeout: d + 30*time.Second}).Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, msg)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// logTail returns the last n lines Caddy wrote.
func (p *caddyProcess) logTail(n int) string {
	raw, _ := os.ReadFile(filepath.Join(p.root, "caddy.log"))
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// errorLines returns the lines of Caddy's log at level error or above, at most n.
func (p *caddyProcess) errorLines(n int) []string {
	raw, _ := os.ReadFile(filepath.Join(p.root, "caddy.log"))
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, `"level":"error"`) || strings.Contains(line, `"level":"fatal"`) || strings.Contains(line, "panic") {
			if out = append(out, line); len(out) == n {
				break
			}
		}
	}
	return out
}

// stop shuts Caddy down gracefully (SIGINT, so Badger closes cleanly), kills it after 15s, and
// removes its temp dir.
func (p *caddyProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	os.RemoveAll(p.root)
}

// dirUsage is the disk space a directory tree takes, split by Badger file kind.
type dirUsage struct {
	total, vlog, sst, other int64 // bytes allocated on disk (du), not apparent sizes
	vlogFiles, sstFiles     int
}

// diskUsage walks dir and adds up allocated blocks, like du.
func diskUsage(dir string) (dirUsage, error) {
	var u dirUsage
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // Badger removed a file while we walked
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		size := st.Blocks * 512
		u.total += size
		switch filepath.Ext(path) {
		case ".vlog":
			u.vlog += size
			u.vlogFiles++
		case ".sst":
			u.sst += size
			u.sstFiles++
		default:
			u.other += size
		}
		return nil
	})
	return u, err
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// indent prefixes every line of s with a tab.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = "\t" + lines[i]
	}
	return strings.Join(lines, "\n")
}
