package caddymodule

import (
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Caddy's /load answers before the listeners it gives up are closed: Stop starts each old
// server's Shutdown in a goroutine and returns once those started, and a config that failed to
// start closes the listeners it had opened the same way (or when its Serve goroutine first runs).
// Caddy binds every config's listener with SO_REUSEPORT, so until then Linux hands a new
// connection to either socket, and one queued on the socket as it closes is reset with its
// request unread (one the old server accepted as it shut down is read, dropped unanswered and
// closed: EOF). A provider would send again. The tests send once the load has settled instead,
// so that a send that fails means what it says and is never retried blind.

// sentThrough is the listening sockets each client last sent through (*http.Client → string).
var sentThrough sync.Map

// awaitLoadSettled waits until this process listens on no address twice, that is until the
// listeners of the config replaced (or of the one that failed to start) are closed. If the
// listeners changed since client last came here (or it never did), its idle keep-alive
// connections may lead to a server that is shutting down and closes them, maybe just as a request
// is written onto one: they are dropped.
func awaitLoadSettled(t testing.TB, client *http.Client) {
	t.Helper()
	var listening string
	deadline := time.Now().Add(10 * time.Second)
	for {
		var twice []string
		listening, twice = ownListeners()
		if len(twice) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a config load never settled: %s still listened on twice", strings.Join(twice, ", "))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if before, seen := sentThrough.Swap(client, listening); !seen || before != listening {
		client.CloseIdleConnections()
	}
}

// ownListeners lists the TCP sockets this process listens on (by inode number) and the addresses
// it listens on more than once. It looks at its own sockets only: the machine's socket tables are
// too long to read on every send. Without Linux's /proc it sees none.
func ownListeners() (listening string, twice []string) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return "", nil
	}
	var inodes []string
	byAddress := map[netip.AddrPort]int{}
	for _, entry := range fds {
		target, err := os.Readlink("/proc/self/fd/" + entry.Name())
		fd, notNumber := strconv.Atoi(entry.Name())
		if err != nil || notNumber != nil || !strings.HasPrefix(target, "socket:") {
			continue
		}
		// The descriptor may have been closed and reused since: these calls only read.
		if accepting, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN); err != nil || accepting != 1 {
			continue
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			continue
		}
		var address netip.AddrPort
		switch sa := sa.(type) {
		case *syscall.SockaddrInet4:
			address = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
		case *syscall.SockaddrInet6:
			address = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
		default:
			continue
		}
		inodes = append(inodes, target)
		if byAddress[address]++; byAddress[address] == 2 {
			twice = append(twice, address.String())
		}
	}
	slices.Sort(inodes)
	return strings.Join(inodes, " "), twice
}
