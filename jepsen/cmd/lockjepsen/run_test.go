package main

import (
	"strings"
	"testing"
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
