//go:build linux

package workload_test

import (
	"testing"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
)

// lockdBin is the lockd binary TestMain built (empty with -short).
var lockdBin string

func TestMain(m *testing.M) {
	lockdtest.Main(m, "workload", map[string]*string{"cmd/lockd": &lockdBin})
}
