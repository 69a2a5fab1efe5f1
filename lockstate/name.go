package lockstate

import (
	"strings"
	"unicode/utf8"
)

// ValidName reports why name is not a valid lock name, or nil. A name is 1–16
// segments joined by '/', each 1–128 bytes of valid UTF-8 without control
// characters, 512 bytes at most in all. The error's code is CodeInvalid.
func ValidName(name string) *Error {
	if name == "" {
		return errorf(CodeInvalid, "lock name is empty")
	}
	if len(name) > MaxNameLen {
		return errorf(CodeInvalid, "lock name is %d bytes, over %d", len(name), MaxNameLen)
	}
	if !utf8.ValidString(name) {
		return errorf(CodeInvalid, "lock name is not valid UTF-8")
	}
	segs, start := 0, 0
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '/' {
			if c := name[i]; c < 0x20 || c == 0x7f {
				return errorf(CodeInvalid, "lock name %q has a control character", name)
			}
			continue
		}
		n := i - start
		if n == 0 {
			return errorf(CodeInvalid, "lock name %q has an empty segment", name)
		}
		if n > MaxSegmentLen {
			return errorf(CodeInvalid, "lock name segment is %d bytes, over %d", n, MaxSegmentLen)
		}
		segs++
		start = i + 1
	}
	if segs > MaxSegments {
		return errorf(CodeInvalid, "lock name has %d segments, over %d", segs, MaxSegments)
	}
	return nil
}

// parentName returns the name one segment up, or "" for a top-level name.
func parentName(name string) string {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return ""
	}
	return name[:i]
}

// covers reports whether a equals b or is an ancestor of b.
func covers(a, b string) bool {
	return a == b || (len(b) > len(a) && b[len(a)] == '/' && b[:len(a)] == a)
}

// Related reports whether two names are in one line of the hierarchy (equal,
// or one an ancestor of the other): only then can their locks conflict.
func Related(a, b string) bool { return covers(a, b) || covers(b, a) }
