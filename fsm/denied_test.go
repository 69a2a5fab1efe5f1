package fsm

import (
	"math/big"
	"testing"

	"github.com/lockd/lockd/lockstate"
)

// CertDenied follows the applied table without its lock: a denial counts
// from its entry on, and a restore brings the snapshot's list, also one
// that denies nothing.
func TestCertDeniedFollowsTheTable(t *testing.T) {
	denied, other := big.NewInt(0x1f00), big.NewInt(0x1f01)
	d := newDriver(t)
	empty := snapshotBytes(t, d.f.FSM)
	if d.f.FSM.CertDenied(denied) {
		t.Fatal("denied before any denial")
	}
	d.must(&lockstate.DenyCert{Serial: "1f00", Reason: "leaked"})
	if !d.f.FSM.CertDenied(denied) || d.f.FSM.CertDenied(other) || d.f.FSM.CertDenied(nil) {
		t.Fatal("after the denial: wrong answers")
	}
	snap := snapshotBytes(t, d.f.FSM)
	f := newTestFSM(t)
	if err := restoreBytes(f.FSM, snap); err != nil {
		t.Fatal(err)
	}
	if !f.FSM.CertDenied(denied) {
		t.Fatal("the restored FSM does not deny the serial")
	}
	if err := restoreBytes(f.FSM, empty); err != nil {
		t.Fatal(err)
	}
	if f.FSM.CertDenied(denied) {
		t.Fatal("a restore of a table without the denial still denies it")
	}
}
