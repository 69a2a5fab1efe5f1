package raftnode

import (
	"testing"

	"github.com/lockd/lockd/jepsen/faultfs/faultfstest"
)

// TestMain lets the power tests' faultfs mirrors be served by this test
// binary run again (faultfstest.Mount), never by the process using them.
func TestMain(m *testing.M) { faultfstest.Main(m) }
