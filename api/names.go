package api

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/lockd/lockd/api/wire"
)

// Lock names and session names are shown to people (lockctl, the
// dashboard, logs): they may not hold characters that hide or reorder
// what is displayed. The table's own rules (lockstate.ValidName: segments,
// lengths, UTF-8) apply on apply; these are checked here, before
// proposing, so that entries already in logs replay unchanged.

// hiddenRune reports whether r is refused in names: C0 and C1 controls,
// DEL, the bidirectional marks, embeddings, overrides and isolates, the
// byte-order mark and the line and paragraph separators.
func hiddenRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0xfeff, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// checkText refuses a name with a hidden character, naming its code point.
func checkText(what, s string) error {
	for i, r := range s {
		if r == utf8.RuneError {
			continue // invalid UTF-8: the table's rules say so
		}
		if hiddenRune(r) {
			return invalid("%s %q has %s at byte %d: control and bidirectional-formatting characters are not allowed (docs/api.md, Names)",
				what, s, codePoint(r), i)
		}
	}
	return nil
}

func codePoint(r rune) string { return fmt.Sprintf("U+%04X", r) }

// checkNames checks each lock name of an acquire.
func checkNames(specs []wire.LockSpec) error {
	for _, sp := range specs {
		if err := checkLockName(sp.Name); err != nil {
			return err
		}
	}
	return nil
}

// checkLockName is checkText for a lock name, with a clearer word than the
// table's for a name with a slash at either end (the table calls it an
// empty segment, which it is).
func checkLockName(name string) error {
	switch {
	case strings.HasPrefix(name, "/"):
		return invalid("lock name %q starts with '/': names are relative, like \"jobs/backup\"", name)
	case strings.HasSuffix(name, "/"):
		return invalid("lock name %q ends with '/'", name)
	}
	return checkText("lock name", name)
}
