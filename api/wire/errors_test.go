package wire_test

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/lockd/lockd/api/wire"
)

// docsRow is a row of docs/api.md's error table: | 409 | `timeout` | when |.
var docsRow = regexp.MustCompile("^\\| (\\d{3}) \\| `([a-z_]+)` \\|")

// TestErrorCodesAreDocumented: docs/api.md's error table has a row for
// each entry of ErrorCodes, status and code, in the same order, and no
// other.
func TestErrorCodesAreDocumented(t *testing.T) {
	f, err := os.Open("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []wire.ErrorCode
	inErrors := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case line == "## Errors":
			inErrors = true
		case inErrors && len(line) > 2 && line[:2] == "##":
			inErrors = false
		case inErrors:
			if m := docsRow.FindStringSubmatch(line); m != nil {
				st, _ := strconv.Atoi(m[1])
				rows = append(rows, wire.ErrorCode{Code: m[2], Status: st})
			}
		}
	}
	list := wire.ErrorCodes()
	for i := range max(len(rows), len(list)) {
		var doc, want wire.ErrorCode
		if i < len(rows) {
			doc = rows[i]
		}
		if i < len(list) {
			want = wire.ErrorCode{Code: list[i].Code, Status: list[i].Status}
		}
		if doc != want {
			t.Errorf("row %d of docs/api.md's error table: %d %q, wire.ErrorCodes: %d %q", i+1, doc.Status, doc.Code, want.Status, want.Code)
		}
	}
}

// TestErrorCodesAreWellFormed: each status of a code is listed once,
// with a meaning, and LookupError finds a code's first (usual) entry.
func TestErrorCodesAreWellFormed(t *testing.T) {
	seen := map[wire.ErrorCode]bool{}
	first := map[string]wire.ErrorCode{}
	for _, e := range wire.ErrorCodes() {
		key := wire.ErrorCode{Code: e.Code, Status: e.Status}
		if seen[key] {
			t.Errorf("%d %s listed twice", e.Status, e.Code)
		}
		seen[key] = true
		if e.Meaning == "" || e.Status < 400 || e.Status > 599 {
			t.Errorf("%+v: want a meaning and an error status", e)
		}
		if _, ok := first[e.Code]; !ok {
			first[e.Code] = e
		}
	}
	for code, e := range first {
		if got, ok := wire.LookupError(code); !ok || got != e {
			t.Errorf("LookupError(%q) = %+v, %v; want %+v", code, got, ok, e)
		}
	}
	if _, ok := wire.LookupError("no_such_code"); ok {
		t.Error("LookupError found a code that is not listed")
	}
}
