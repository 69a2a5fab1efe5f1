//go:build linux

package client_test

import (
	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"testing"
)

// lockdBin is the lockd binary TestMain built for the cluster tests
// (empty with -short, which skips them).
var lockdBin string

// TestMain builds cmd/lockd once, like cmd/lockd/e2e, and reaps any
// lockd process a failed test left behind.
func TestMain(m *testing.M) {
	lockdtest.Main(m, "client tests", map[string]*string{"cmd/lockd": &lockdBin})
}
