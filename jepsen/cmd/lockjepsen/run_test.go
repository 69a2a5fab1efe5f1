package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/nemesis"
)

// A negative control is refused where its run could not expose it, and
// --upgrade-from defaults to the build the control needs.
func TestNegativeControlFlags(t *testing.T) {
	tests := []struct {
		args    string
		wantErr string
		from    string
	}{
		{"--nemesis clock --hold-ttl 10s --hold 2s --ttl 30s --negative wall-clock", "", previousRelease},
		{"--nemesis clock --hold-ttl 10s --hold 2s --negative wall-clock", "needs --ttl of at least 30s", ""},
		{"--nemesis clock --hold-ttl 2s --hold 300ms --negative wall-clock", "needs --hold-ttl above", ""},
		{"--nemesis partition --negative wall-clock", "needs --nemesis clock", ""},
		{"--nemesis disk --negative lying-disk", "", previousRelease},
		{"--nemesis kill --negative lying-disk", "needs --nemesis disk", ""},
		{"--nemesis disk-fail-crash --negative lying-disk", "", previousRelease},
		{"--nemesis disk-fail --negative lying-disk", "needs a power loss", ""},
		{"--nemesis disk-fail-crash --keep", "cannot be drawn", ""},
		{"--nemesis disk --keep", "", previousRelease},
		{"--nemesis member-shrink", "cannot be drawn", ""},
		{"--nemesis member-shrink --nodes 5", "", previousRelease},
		{"--nemesis partition --snapshot-threshold 64 --negative stale-snapshot", "", previousRelease},
		{"--nemesis partition --negative stale-snapshot", "needs --snapshot-threshold", ""},
		{"--nemesis clock --snapshot-threshold 64 --negative stale-snapshot", "needs --snapshot-threshold", ""},
		{"--nemesis upgrade --negative ungated-upgrade", "", preACLRelease},
		{"--nemesis upgrade --negative ungated-upgrade --upgrade-from abc123", "", "abc123"},
		{"--nemesis pause --negative ungated-upgrade", "needs --nemesis upgrade", ""},
		{"--nemesis membership,kill --negative lone-replacement", "", previousRelease},
		{"--nemesis none --negative intruder-admin --acl=false", "needs ACLs", ""},
		{"--nemesis none --negative bogus", "want one of", ""},
		{"--nemesis clock --hold-ttl 3s --negative hold-past-ttl", "", previousRelease},
		{"--nemesis clock --negative hold-past-ttl", "needs --hold-ttl", ""},
		{"--nemesis none --workload election --hold-ttl 1s --negative stale-proclaim", "", previousRelease},
		{"--nemesis none --workload election --negative stale-proclaim", "needs --workload election and --hold-ttl", ""},
		{"--nemesis none --hold-ttl 1s --negative stale-proclaim", "needs --workload election and --hold-ttl", ""},
	}
	for _, tt := range tests {
		c, err := parseRunFlags(append(strings.Fields(tt.args), "--dir", t.TempDir()))
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.args, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", tt.args, err, tt.wantErr)
		case err == nil && c.upgradeFrom != tt.from:
			t.Errorf("%s: --upgrade-from %q, want %q", tt.args, c.upgradeFrom, tt.from)
		}
	}
}

// The nemesis's schedule follows the flags: a control that needs aiming
// is aimed, the others' breakage is passed on, and the seed fixes it.
func TestNemesisConfig(t *testing.T) {
	tests := []struct {
		args                  string
		aim                   string
		lone, ungated, hasTTL bool
	}{
		{"--nemesis partition,kill", "", false, false, false},
		{"--nemesis clock --hold-ttl 10s --hold 2s --ttl 30s --negative wall-clock", nemesis.AimWallClock, false, false, true},
		{"--nemesis membership,kill --negative lone-replacement", nemesis.AimLoneReplacement, true, false, false},
		{"--nemesis upgrade --negative ungated-upgrade", "", false, true, false},
		{"--nemesis power --negative no-fsync", nemesis.AimNoFsync, false, false, false},
	}
	for _, tt := range tests {
		cfg, err := parseRunFlags(append(strings.Fields(tt.args), "--seed", "7", "--dir", t.TempDir()))
		if err != nil {
			t.Fatalf("%s: %v", tt.args, err)
		}
		r, err := newRun(cfg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		n := r.nemesisConfig()
		if n.Aim != tt.aim || n.LoneReplacements != tt.lone || n.UngatedUpgrade != tt.ungated || (n.HoldTTL > 0) != tt.hasTTL {
			t.Errorf("%s: aim %q lone %v ungated %v hold TTL %v", tt.args, n.Aim, n.LoneReplacements, n.UngatedUpgrade, n.HoldTTL)
		}
		if a, b := n.Rand.Int63(), r.nemesisConfig().Rand.Int63(); a != b {
			t.Errorf("%s: the same seed drew %d and %d", tt.args, a, b)
		}
	}
}

// judge writes what it decided: a no-consensus run whose history shows
// two holders at once is flagged and exercised (exit 0); one whose holds
// follow each other is neither, and exits "not exercised".
func TestJudgeWritesResults(t *testing.T) {
	overlap := join(acquire(0, 0, 10, "jepsen/mutex", 1, 0), acquire(1, 5, 20, "jepsen/mutex", 1, 0),
		[]ev{release(0, 30, "jepsen/mutex"), release(1, 40, "jepsen/mutex")})
	apart := join(acquire(0, 0, 10, "jepsen/mutex", 1, 0), []ev{release(0, 15, "jepsen/mutex")},
		acquire(1, 5, 20, "jepsen/mutex", 2, 0), []ev{release(1, 40, "jepsen/mutex")})
	for _, tt := range []struct {
		name      string
		events    []ev
		exercised bool
		exit      int
	}{
		{"overlap", overlap, true, 0},
		{"apart", apart, false, exitNotExercised},
	} {
		cfg, err := parseRunFlags([]string{"--nemesis", "none", "--negative", "no-consensus", "--dir", t.TempDir(), "--out", t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		r, err := newRun(cfg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for i := range tt.events {
			tt.events[i].Index = i
		}
		sum, err := r.judge(tt.events, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if sum.Flagged() != tt.exercised || sum.Control == nil || sum.Control.Exercised != tt.exercised {
			t.Errorf("%s: flagged %v, control %+v", tt.name, sum.Flagged(), sum.Control)
		}
		if got := judgedAsExpected(cfg, sum); got != tt.exit {
			t.Errorf("%s: exit %d, want %d", tt.name, got, tt.exit)
		}
		b, err := os.ReadFile(filepath.Join(r.outDir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`"exercised": %v`, tt.exercised); !strings.Contains(string(b), want) {
			t.Errorf("%s: results.json lacks %s", tt.name, want)
		}
	}
}

// The nodes get the environment their run needs: no-fsync's store is
// bolt's, and --raft-log reaches every node.
func TestClusterEnv(t *testing.T) {
	for _, tt := range []struct{ args, want string }{
		{"--nemesis power --negative no-fsync", "LOCKD_RAFT_LOG=bolt"},
		{"--nemesis power --raft-log bolt", "LOCKD_RAFT_LOG=bolt"},
		{"--nemesis clock --hold-ttl 10s --hold 2s --ttl 30s --negative wall-clock", "LOCKD_UNSAFE=wall-clock"},
		{"--nemesis none --hold-ttl 3s --negative hold-past-ttl", "LOCKD_UNSAFE=no-hold-ttl"},
	} {
		cfg, err := parseRunFlags(append(strings.Fields(tt.args), "--dir", t.TempDir()))
		if err != nil {
			t.Fatalf("%s: %v", tt.args, err)
		}
		if env := clusterEnv(cfg); !slices.Contains(env, tt.want) {
			t.Errorf("%s: environment %q lacks %s", tt.args, env, tt.want)
		}
	}
}
