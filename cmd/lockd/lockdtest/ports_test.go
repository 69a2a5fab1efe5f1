package lockdtest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// FreePorts draws distinct ports outside the kernel's ephemeral range,
// each free for TCP and UDP when returned, and claimed: no other process
// gets one while the test runs.
func TestFreePorts(t *testing.T) {
	lo, hi := portRange()
	ports := FreePorts(t, 8)
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lo || p >= hi || seen[p] {
			t.Fatalf("ports %v: %d is outside [%d, %d) or repeated", ports, p, lo, hi)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d is not free for TCP: %v", p, err)
		}
		l.Close()
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d is not free for UDP: %v", p, err)
		}
		u.Close()
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "lockd-test-ports", strconv.Itoa(p)), os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("port %d has no claim: %v", p, err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		f.Close()
		if err == nil {
			t.Fatalf("port %d: its claim is not held", p)
		}
	}
}

func TestPortsOutside(t *testing.T) {
	for _, tc := range []struct {
		content string
		lo, hi  int
	}{
		{"32768\t60999\n", 20000, 32768},
		{"40000 60999", 20000, 40000},
		{"10000 50000", 50001, 65536},
		{"1024 65535", 20000, 32768},
		{"", 20000, 32768},
		{"garbage", 20000, 32768},
		{"60999 32768", 20000, 32768},
	} {
		if lo, hi := portsOutside(tc.content); lo != tc.lo || hi != tc.hi {
			t.Errorf("portsOutside(%q) = [%d, %d), want [%d, %d)", tc.content, lo, hi, tc.lo, tc.hi)
		}
	}
}
