//go:build linux

package client_test

import (
	"flag"
	"fmt"
	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"os"
	"testing"
)

// lockdBin is the lockd binary TestMain built for the cluster tests
// (empty with -short, which skips them).
var lockdBin string

// TestMain builds cmd/lockd once, like cmd/lockd/e2e, and reaps any
// lockd process a failed test left behind.
func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "lockd-client-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "client tests:", err)
		os.Exit(1)
	}
	if !testing.Short() {
		if lockdBin, err = lockdtest.Build(dir, "cmd/lockd"); err != nil {
			fmt.Fprintln(os.Stderr, "client tests: build lockd:", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	if n := lockdtest.ReapAll(); n > 0 {
		fmt.Fprintf(os.Stderr, "client tests: killed %d lockd process(es) still running\n", n)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
