package lockstate

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// The content rules of every command are its Validate method, next to its
// type; the helpers below are what they share. The API calls Validate to
// answer a bad request before proposing it, and Table.Apply calls it again
// on every entry before looking at the table. Each message starts with the
// offending field, as a client sends it.

// invalidf returns a CodeInvalid error.
func invalidf(format string, args ...any) *Error { return errorf(CodeInvalid, format, args...) }

// requireSession refuses session 0, which no session has.
func requireSession(id SessionID) *Error {
	if id == 0 {
		return invalidf("session is required")
	}
	return nil
}

// inRange checks a duration field against [lo, hi].
func inRange(field string, d, lo, hi time.Duration) *Error {
	if d < lo || d > hi {
		return invalidf("%s %v is outside [%v, %v]", field, d, lo, hi)
	}
	return nil
}

// validRequestID checks a client-chosen idempotency key. Ids starting with
// '~' are the table's own (see Acquire.apply and surrender), and '/' would
// not fit in a URL path.
func validRequestID(id string) *Error {
	switch {
	case len(id) > MaxRequestIDLen:
		return invalidf("request_id is %d bytes, over %d", len(id), MaxRequestIDLen)
	case !utf8.ValidString(id):
		return invalidf("request_id is not valid UTF-8")
	case id != "" && id[0] == '~':
		return invalidf("request_id %q: ids starting with '~' are reserved", id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == 0x7f || c == '/' {
			return invalidf("request_id %q has a control character or '/'", id)
		}
	}
	return nil
}

// valueProblem says what is wrong with a hold's value (LockSpec.Value,
// Proclaim.Value), "" when nothing: it must be UTF-8 text of at most
// MaxValueLen bytes ("" is no value). Callers name the field; nothing is
// formatted for a good value, which every acquire checks on apply.
func valueProblem(v string) string {
	switch {
	case len(v) > MaxValueLen:
		return fmt.Sprintf("is %d bytes, over %d", len(v), MaxValueLen)
	case !utf8.ValidString(v):
		return "is not valid UTF-8"
	}
	return ""
}
