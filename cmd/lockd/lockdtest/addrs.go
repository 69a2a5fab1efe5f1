//go:build linux

package lockdtest

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// RefusingAddr returns a loopback address that refuses connections until
// the test ends: a TCP socket bound to it that never listens. (A port of
// a closed listener is free for any process that binds port 0 meanwhile,
// such as another package's test server, which would then answer.)
func RefusingAddr(t testing.TB) string {
	t.Helper()
	_, addr := loopbackSocket(t)
	return addr
}

// SilentAddr returns a loopback address that completes no connection
// until the test ends, as a dead host or a stopped container does (their
// SYNs go unanswered): a listener with a backlog of 0 whose accept queue
// is full with one connection it never accepts, for Linux drops the SYNs
// of a listener whose accept queue is full. (A closed port answers RST at
// once, and a SIGSTOPped process's port still completes the handshake.)
func SilentAddr(t testing.TB) string {
	t.Helper()
	fd, addr := loopbackSocket(t)
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	filler, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	probe, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err == nil {
		probe.Close()
		t.Fatal("a full listener completed a connection: this kernel answers SYNs it cannot queue")
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a connection to a full listener: %v, want a timeout", err)
	}
	return addr
}

// loopbackSocket is a TCP socket bound to a port of 127.0.0.1 the kernel
// chose, closed when the test ends, and its address.
func loopbackSocket(t testing.TB) (fd int, addr string) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
