package lockdtest

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// FreePorts returns n distinct loopback ports free for both TCP and UDP
// (gossip listens on both), drawn outside the kernel's ephemeral range
// (portRange) and claimed for the test. The ports are closed again before
// a node binds them; a port the kernel may hand out meanwhile (for a bind
// to port 0, or as the local port of an outgoing connection, in any
// process), or another test process's draw, would take it first, and the
// node would fail with "address already in use".
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	lo, hi := portRange()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			t.Fatalf("could not find %d free ports in [%d, %d)", n, lo, hi)
		}
		port := lo + rand.IntN(hi-lo)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if slices.Contains(ports, port) || !claim(t, port) {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		closers = append(closers, l)
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue
		}
		closers = append(closers, u)
		ports = append(ports, port)
	}
	return ports
}

// claim reserves port for this test against the other processes that
// draw ports (go test runs packages in parallel, the Python tests use the
// same claims): an flock on a file named after the port, held until the
// test ends; the kernel drops it if the process dies. False: another
// process holds it.
func claim(t testing.TB, port int) bool {
	dir := filepath.Join(os.TempDir(), "lockd-test-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("claim a port: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("claim a port: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	t.Cleanup(func() { f.Close() })
	return true
}

// portRange is where FreePorts draws ports: outside Linux's ephemeral
// range (/proc/sys/net/ipv4/ip_local_port_range).
func portRange() (lo, hi int) {
	b, _ := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	return portsOutside(string(b))
}

// portsOutside returns the ports outside the ephemeral range that the
// file's content (first and last port) gives: 20000 up to its first port,
// else above its last; the default range (32768–60999) where the content
// does not parse. With no room on either side, it returns 20000–32768,
// where a bind to port 0 may meet a test's port.
func portsOutside(ephemeral string) (lo, hi int) {
	const low, room = 20000, 1000
	first, last := 32768, 60999
	if _, err := fmt.Sscan(ephemeral, &first, &last); err != nil || first > last {
		first, last = 32768, 60999
	}
	switch {
	case first >= low+room:
		return low, first
	case last <= 65535-room:
		return last + 1, 65536
	default:
		return low, 32768
	}
}

// Tail returns the last n lines of a file (a node's log, for a failing
// test's output), or the error that kept it from being read.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 4*n {
			lines = slices.Clone(lines[len(lines)-n:])
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
