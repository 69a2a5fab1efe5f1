package lockdtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
)

// FreePorts returns n distinct loopback ports free for both TCP and UDP
// (gossip listens on both).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	var ports []int
	for len(ports) < n {
		if len(closers) > 20*n {
			t.Fatalf("could not find %d free ports", n)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, l)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		closers = append(closers, u)
		ports = append(ports, port)
	}
	return ports
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
