//go:build linux && !lockd_faults

package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// lockd as built for production has none of the jepsen suite's flags
// (cmd/lockd/harness.go): its help names none, and it refuses them as
// unknown flags before it starts a node.
func TestProductionBuildHasNoHarness(t *testing.T) {
	needBinary(t)
	out, _ := exec.Command(lockdBin, "--help").CombinedOutput()
	help := strings.ToLower(string(out))
	if !strings.Contains(help, "-node-id") {
		t.Fatalf("lockd --help printed no flags:\n%s", out)
	}
	for _, word := range []string{"unsafe", "clock-hook", "debug/clock"} {
		if strings.Contains(help, word) {
			t.Errorf("lockd --help mentions %q:\n%s", word, out)
		}
	}
	for _, args := range [][]string{{"--unsafe", "no-consensus"}, {"--test-clock-hook", "--dev"}} {
		out, err := exec.Command(lockdBin, args...).CombinedOutput()
		if code := exitCode(err); code != 2 || !strings.Contains(string(out), "flag provided but not defined: -"+strings.TrimPrefix(args[0], "--")) {
			t.Errorf("lockd %s: exit %d, %s; want exit 2 for an unknown flag", strings.Join(args, " "), code, out)
		}
	}
}

// exitCode is a finished command's exit status (0 for no error, -1 when
// it did not run to an exit).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
