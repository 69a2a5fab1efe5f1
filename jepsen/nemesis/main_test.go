package nemesis

import (
	"testing"

	"github.com/lockd/lockd/jepsen/faultfs/faultfstest"
)

// TestMain lets TestFreeDiskGivesTheSpaceBack's faultfs mirror be served
// by this test binary run again (faultfstest.Mount), never by the
// process using it.
func TestMain(m *testing.M) { faultfstest.Main(m) }
