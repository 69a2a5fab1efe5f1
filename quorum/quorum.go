// Package quorum decides how many constituents of a multi-lock request must
// be granted together: all of them, any one, or a majority (k of n).
//
// It is pure: no state, no I/O. lockstate asks it for k and grants a request
// atomically once k constituents are grantable at the same time.
package quorum

import "fmt"

// Requirement names how many of a request's n locks must be held at once.
type Requirement string

// The requirements a request may carry. The empty Requirement means All.
const (
	All      Requirement = "all"
	Any      Requirement = "any"
	Majority Requirement = "majority"
)

// Parse returns the requirement named by s; "" means All.
func Parse(s string) (Requirement, error) {
	switch Requirement(s) {
	case "", All:
		return All, nil
	case Any, Majority:
		return Requirement(s), nil
	}
	return "", fmt.Errorf("quorum: unknown requirement %q (want all, any or majority)", s)
}

// Need returns k, the number of constituents out of n that must be granted
// together for the requirement to be met. n must be at least 1.
func (r Requirement) Need(n int) (int, error) {
	if n < 1 {
		return 0, fmt.Errorf("quorum: a request needs at least one lock, got %d", n)
	}
	switch r {
	case "", All:
		return n, nil
	case Any:
		return 1, nil
	case Majority:
		return n/2 + 1, nil
	}
	return 0, fmt.Errorf("quorum: unknown requirement %q", string(r))
}

// Pick chooses which constituents to take: the first k of the grantable
// ones, in request order. grantable[i] says whether constituent i could be
// granted now. It returns the chosen indices, or nil when fewer than k are
// grantable (the request must keep waiting, holding nothing).
func Pick(k int, grantable []bool) []int {
	return AppendPick(nil, k, grantable)
}

// AppendPick is Pick appending to dst, so a caller can pass a buffer and
// pick without allocating. It returns nil when fewer than k are grantable.
func AppendPick(dst []int, k int, grantable []bool) []int {
	if k < 1 {
		return nil
	}
	chosen := dst[:0]
	for i, ok := range grantable {
		if !ok {
			continue
		}
		chosen = append(chosen, i)
		if len(chosen) == k {
			return chosen
		}
	}
	return nil
}
