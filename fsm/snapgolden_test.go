package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// The golden snapshots in testdata/snapshots were written by the build
// before the record registry (fsm/records.go), one table per snapshot
// format it writes: what that build persisted, the format it chose and the
// table's digest. TestGoldenSnapshots proves that this build writes the
// same bytes for the same table, chooses the same format, keeps every
// digest, and restores the old bytes to the same state: snapshots are
// sent between nodes of mixed builds and digests compared across them.
//
// Like testdata/compat, they record past behaviour: never regenerate them
// to make the test pass. -update-golden writes them from this build, for
// a deliberate, versioned format change only.
var updateGolden = flag.Bool("update-golden", false, "TestGoldenSnapshots: rewrite testdata/snapshots from this build (never to make the test pass)")

const goldenDir = "testdata/snapshots"

// goldenEntry is what golden.json keeps of one table.
type goldenEntry struct {
	Format int    `json:"format"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`           // of the snapshot stream
	Digest string `json:"digest"`           // the table's digest
	File   string `json:"file,omitempty"`   // the stream itself, for the tables small enough to keep
	Chunks bool   `json:"chunks,omitempty"` // the stream spans several chunks
}

// goldenTables are the tables of the golden snapshots, each built the same
// way by every build.
var goldenTables = []struct {
	name  string
	build func(t testing.TB) *driver
	keep  bool // keep the stream itself, not only its hash
}{
	{"empty", func(t testing.TB) *driver { return newDriver(t) }, true},
	{"rich", richState, true},
	{"acl", aclState, true},
	{"token-limits", tokenLimitsState, true},
	{"denied", deniedState, true},
	{"shared-ids", sharedIDsState, true},
	{"generated-acl", generatedACLState, true},
	{"hold-values", holdValuesState, true},
	{"big", bigState, false},
}

// tokenLimitsState is aclState with a token that has limits of its own
// (snapshot format 4).
func tokenLimitsState(t testing.TB) *driver {
	d := aclState(t)
	d.must(&lockstate.CreateToken{Authority: lockstate.Authority{Auth: mgmtToken}, ID: goneToken, Hash: testHash(3), Name: "capped",
		Rules:  []lockstate.Rule{{Prefix: "x", Access: lockstate.AccessWrite}},
		Limits: &lockstate.TokenLimits{Sessions: 3, Waiters: lockstate.NoLimit}})
	return d
}

// deniedState is tokenLimitsState with a deny list (snapshot format 5).
func deniedState(t testing.TB) *driver {
	d := tokenLimitsState(t)
	d.must(&lockstate.DenyCert{Authority: lockstate.Authority{Auth: mgmtToken}, Serial: "ab", Reason: "leaked"})
	d.must(&lockstate.DenyCert{Serial: "1f00"})
	return d
}

// sharedIDsState is deniedState with a request id that two sessions share
// (snapshot format 6).
func sharedIDsState(t testing.TB) *driver {
	d := deniedState(t)
	for _, name := range []string{"shared/a", "shared/b"} {
		s := d.session(func(c *lockstate.CreateSession) { c.Auth = mgmtToken })
		c := scoped(s, "job", name)
		c.Auth = mgmtToken
		d.must(c)
	}
	return d
}

// holdValuesState is sharedIDsState with values (snapshot format 7): a
// hold granted with one, one given its value by a proclaim, a waiter
// whose lock carries one, and a request that gave one and was released.
func holdValuesState(t testing.TB) *driver {
	d := sharedIDsState(t)
	as := func(c *lockstate.CreateSession) { c.Auth = mgmtToken }
	auth := lockstate.Authority{Auth: mgmtToken}
	spec := func(name, value string) []lockstate.LockSpec {
		l := lock(name, lockstate.Write)
		l.Value = value
		return []lockstate.LockSpec{l}
	}
	leader, candidate, other := d.session(as), d.session(as), d.session(as)
	d.must(&lockstate.Acquire{Session: leader, Authority: auth, Locks: spec("svc/scheduler", "10.0.0.7:8080")})
	d.must(&lockstate.Acquire{Session: candidate, Authority: auth, Locks: spec("svc/scheduler", "10.0.0.8:8080"), Wait: time.Minute})
	d.must(&lockstate.Acquire{Session: other, Authority: auth, Locks: spec("svc/indexer", "")})
	d.must(&lockstate.Proclaim{Session: other, Authority: auth, Name: "svc/indexer", Value: "ünïcode ✓"})
	d.must(&lockstate.Acquire{Session: other, Authority: auth, Locks: spec("svc/once", "gone")})
	d.must(&lockstate.Release{Session: other, Authority: auth, Name: "svc/once"})
	return d
}

// generatedACLState is a generated workload with ACLs.
func generatedACLState(t testing.TB) *driver {
	d := newDriver(t)
	g := newGen(rand.New(rand.NewPCG(7, 7)))
	g.acl = &aclGen{}
	for range 400 {
		cmd := g.next(d.f.FSM)
		d.index++
		g.observe(cmd, d.f.applyAt(d.index, g.now, cmd))
	}
	return d
}

func goldenOf(t testing.TB, d *driver) (goldenEntry, []byte) {
	b := snapshotBytes(t, d.f.FSM)
	sum, digest := sha256.Sum256(b), d.f.Digest()
	return goldenEntry{Format: snapshotFormatOf(t, b), Size: len(b), SHA256: hex.EncodeToString(sum[:]),
		Digest: hex.EncodeToString(digest[:]), Chunks: len(b) > chunkSize}, b
}

func TestGoldenSnapshots(t *testing.T) {
	if *updateGolden {
		writeGolden(t)
	}
	raw, err := os.ReadFile(filepath.Join(goldenDir, "golden.json"))
	if err != nil {
		t.Fatalf("%v (written once, by an earlier build: see snapgolden_test.go)", err)
	}
	var golden map[string]goldenEntry
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	formats := map[int]bool{}
	for _, gt := range goldenTables {
		t.Run(gt.name, func(t *testing.T) {
			want, ok := golden[gt.name]
			if !ok {
				t.Fatalf("no golden entry for %s", gt.name)
			}
			formats[want.Format] = true
			d := gt.build(t)
			got, b := goldenOf(t, d)
			got.File = want.File
			if got != want {
				t.Errorf("this build's snapshot:\n %+v\nthe golden one:\n %+v", got, want)
			}
			if want.File == "" {
				return
			}
			old, err := os.ReadFile(filepath.Join(goldenDir, want.File))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(old, b) {
				t.Errorf("this build writes other bytes than %s", want.File)
			}
			f := newTestFSM(t)
			seedOther(t, f)
			if err := restoreBytes(f.FSM, old); err != nil {
				t.Fatalf("restore %s: %v", want.File, err)
			}
			if d := f.Digest(); hex.EncodeToString(d[:]) != want.Digest {
				t.Fatalf("%s restores to digest %x, want %s", want.File, d, want.Digest)
			}
			sameState(t, "restored "+want.File, d.f.FSM, f.FSM)
		})
	}
	for f := snapshotFormat2; f <= SnapshotFormat; f++ {
		if !formats[f] {
			t.Errorf("no golden snapshot of format %d", f)
		}
	}
}

// writeGolden writes testdata/snapshots from this build.
func writeGolden(t *testing.T) {
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	golden := map[string]goldenEntry{}
	for _, gt := range goldenTables {
		e, b := goldenOf(t, gt.build(t))
		if gt.keep {
			e.File = gt.name + ".bin"
			if err := os.WriteFile(filepath.Join(goldenDir, e.File), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		golden[gt.name] = e
	}
	raw, err := json.MarshalIndent(golden, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(goldenDir, "golden.json"), append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
