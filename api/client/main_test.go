//go:build linux

package client_test

import (
	"os"
	"testing"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/cmd/lockd/lockdtest"
)

// lockdBin is the lockd binary TestMain built for the cluster tests
// (empty with -short, which skips them).
var lockdBin string

// TestMain builds cmd/lockd once, like cmd/lockd/e2e, and reaps any
// lockd process a failed test left behind. It also starts an in-process
// dev node and points LOCKD_ADDR at it: the examples talk to the cluster
// LOCKD_ADDR names, as a user's program does.
func TestMain(m *testing.M) {
	addr, stop := exampleServer()
	os.Setenv(client.EnvAddr, addr)
	for _, v := range []string{client.EnvToken, client.EnvCACert, client.EnvClientCert, client.EnvClientKey} {
		os.Unsetenv(v)
	}
	code := lockdtest.Run(m, "client tests", map[string]*string{"cmd/lockd": &lockdBin})
	stop()
	os.Exit(code)
}
