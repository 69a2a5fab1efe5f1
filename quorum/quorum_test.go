package quorum

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Requirement
		err  bool
	}{
		{"", All, false},
		{"all", All, false},
		{"any", Any, false},
		{"majority", Majority, false},
		{"ALL", "", true},
		{"most", "", true},
	} {
		got, err := Parse(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Parse(%q) = %q, %v; want %q, err=%v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestNeed(t *testing.T) {
	for _, tc := range []struct {
		r    Requirement
		n    int
		want int
	}{
		{All, 1, 1}, {All, 5, 5},
		{Any, 1, 1}, {Any, 7, 1},
		{Majority, 1, 1}, {Majority, 2, 2}, {Majority, 3, 2},
		{Majority, 4, 3}, {Majority, 5, 3}, {Majority, 6, 4},
		{"", 3, 3},
	} {
		got, err := tc.r.Need(tc.n)
		if err != nil || got != tc.want {
			t.Errorf("%q.Need(%d) = %d, %v; want %d", tc.r, tc.n, got, err, tc.want)
		}
	}
	if _, err := All.Need(0); err == nil {
		t.Error("Need(0) must fail")
	}
	if _, err := Requirement("x").Need(2); err == nil {
		t.Error("unknown requirement must fail")
	}
}

// Majority must be the smallest k for which two k-subsets of n always
// intersect: that is what makes "majority" locking exclusive.
func TestMajorityIsSmallestIntersecting(t *testing.T) {
	for n := 1; n <= 16; n++ {
		k, _ := Majority.Need(n)
		if 2*k <= n {
			t.Errorf("n=%d k=%d: two majorities could be disjoint", n, k)
		}
		if 2*(k-1) > n {
			t.Errorf("n=%d k=%d: k-1 would already intersect; not minimal", n, k)
		}
	}
}

func TestPick(t *testing.T) {
	for _, tc := range []struct {
		k    int
		g    []bool
		want []int
	}{
		{1, []bool{false, true, true}, []int{1}},
		{2, []bool{true, false, true, true}, []int{0, 2}},
		{3, []bool{true, false, true}, nil},
		{3, []bool{true, true, true}, []int{0, 1, 2}},
		{0, []bool{true}, nil},
		{1, nil, nil},
	} {
		if got := Pick(tc.k, tc.g); !slices.Equal(got, tc.want) {
			t.Errorf("Pick(%d, %v) = %v; want %v", tc.k, tc.g, got, tc.want)
		}
	}
}
