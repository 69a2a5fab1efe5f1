package resource

import (
	"errors"
	"testing"
)

func TestFencing(t *testing.T) {
	type use struct {
		name, mode string
		token      uint64
		stale      bool
	}
	cases := []struct {
		name string
		uses []use
	}{
		{"newer writer fences an older one", []use{
			{"m", "write", 5, false}, {"m", "write", 6, false}, {"m", "write", 5, true}, {"m", "write", 6, false}}},
		{"readers share, a newer writer fences them", []use{
			{"r", "read", 3, false}, {"r", "read", 4, false}, {"r", "read", 3, false},
			{"r", "write", 7, false}, {"r", "read", 4, true}, {"r", "write", 6, true}}},
		{"a newer reader fences an older writer", []use{
			{"r", "write", 3, false}, {"r", "read", 4, false}, {"r", "write", 3, true}}},
		{"parent and child conflict", []use{
			{"h/a", "write", 4, false}, {"h", "write", 5, false}, {"h/a", "write", 4, true}, {"h/b", "write", 3, true}}},
		{"siblings and prefixes that are not ancestors do not", []use{
			{"h/a", "write", 9, false}, {"h/b", "write", 2, false}, {"h/ab", "write", 1, false}, {"hx", "write", 1, false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := New(true)
			for i, u := range tc.uses {
				_, err := r.Write(u.name, u.mode, u.token, []int64{int64(i)})
				if got := errors.Is(err, ErrStale); got != u.stale {
					t.Fatalf("use %d %+v: stale=%v, want %v", i, u, got, u.stale)
				}
			}
		})
	}
}

func TestUnfencedAcceptsStaleAndSequences(t *testing.T) {
	r := New(false)
	s1, err := r.Write("m", "write", 9, []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	v, s2, err := r.Read("m", "write", 1)
	if err != nil || s2 <= s1 || len(v) != 1 || v[0] != 1 {
		t.Fatalf("read = %v %d %v", v, s2, err)
	}
	v[0] = 42 // a copy: the register is unchanged
	if got := r.Snapshot()["m"]; got[0] != 1 {
		t.Fatalf("register aliased: %v", got)
	}
	if _, n := r.Enter("s"); n != 1 {
		t.Fatal(n)
	}
	if _, n := r.Exit("s"); n != 0 {
		t.Fatal(n)
	}
}
