//go:build linux && lockd_faults

package lockdtest

// Tests built for the jepsen suite's build start its lockd (cmd/lockd's
// --unsafe modes): buildFlags.
func init() { buildFlags = []string{"-tags", "lockd_faults"} }
