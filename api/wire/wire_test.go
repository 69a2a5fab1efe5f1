package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestEncodings: the shapes docs/api.md documents, byte for byte, and the
// inputs each encoding refuses.
func TestEncodings(t *testing.T) {
	ttl := Duration(10 * time.Second)
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"acquire", AcquireRequest{Session: "k1", Locks: []LockSpec{{Name: "a", Mode: Read}}, Wait: Duration(1500 * time.Millisecond)},
			`{"session":"k1","locks":[{"name":"a","mode":"read"}],"wait":"1.5s"}`},
		{"session", CreateSessionRequest{TTL: &ttl}, `{"ttl":"10s"}`},
		{"grant", AcquireResponse{Status: "granted", RequestID: "r", Session: "k1", Token: 7,
			Granted: []Grant{{Name: "a", Mode: Write, Weight: 1, Token: 7}}},
			`{"status":"granted","request_id":"r","session":"k1","token":7,"granted":[{"name":"a","mode":"write","weight":1,"token":7}]}`},
		{"error", ErrorBody{Error: ErrorDetail{Code: "no_leader", Message: "m", NotApplied: true}},
			`{"error":{"code":"no_leader","message":"m","not_applied":true}}`},
		{"quorum lost", ErrorBody{Error: ErrorDetail{Code: "no_leader", Message: "m", NotApplied: true, QuorumLost: true}},
			`{"error":{"code":"no_leader","message":"m","not_applied":true,"quorum_lost":true}}`},
		{"a batched keepalive", KeepAlivesRequest{Sessions: []string{"k1", "k2"}}, `{"sessions":["k1","k2"]}`},
		{"its answer", KeepAlivesResponse{Sessions: []KeptSession{{ID: "k1", TTL: ttl},
			{ID: "k2", Error: &ErrorDetail{Code: "session_not_found", Message: "session not found"}, Status: 404}}},
			`{"sessions":[{"id":"k1","ttl":"10s"},{"id":"k2","error":{"code":"session_not_found","message":"session not found"},"status":404}]}`},
		// Leader election (v1.2).
		{"a lock with a value", AcquireRequest{Session: "k1", Locks: []LockSpec{{Name: "svc/a", Value: "10.0.0.7:8080"}}},
			`{"session":"k1","locks":[{"name":"svc/a","value":"10.0.0.7:8080"}]}`},
		{"a holder without a value", Holder{Session: "", Mode: Write, Weight: 1, Count: 1, Token: 7},
			`{"session":"","mode":"write","weight":1,"count":1,"token":7,"value":""}`},
		{"a proclaim", ProclaimRequest{Session: "k1", Name: "svc/a", Value: ""}, `{"session":"k1","name":"svc/a","value":""}`},
		{"a proclaimed hold", ProclaimResponse{Name: "svc/a", Token: 7, Value: "v", Version: 9},
			`{"name":"svc/a","token":7,"value":"v","version":9}`},
		{"an election without a leader", Election{Name: "svc/a", Version: 3},
			`{"name":"svc/a","version":3,"leader":null,"candidates":0}`},
		{"an election", Election{Name: "svc/a", Version: 9, Candidates: 2,
			Leader: &ElectionLeader{Value: "v", Token: 7, Since: time.Date(2026, 11, 28, 9, 14, 3, 0, time.UTC)}},
			`{"name":"svc/a","version":9,"leader":{"value":"v","token":7,"since":"2026-11-28T09:14:03Z"},"candidates":2}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.name, b, err, tc.want)
		}
	}
}

func TestDecodings(t *testing.T) {
	var req AcquireRequest
	if err := json.Unmarshal([]byte(`{"session":42,"locks":[{"name":"a"}],"wait":"2s"}`), &req); err != nil ||
		req.Session != "42" || req.Locks[0].Mode != "" || req.Wait != Duration(2*time.Second) {
		t.Fatalf("%+v, %v: want session 42 (a number of an old session), mode absent, wait 2s", req, err)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"session":"k","locks":[{"name":"a","mode":"exclusive"}]}`, `unknown mode "exclusive"`},
		{`{"session":"k","locks":[{"name":"a","mode":2}]}`, "mode 2 is not a string"},
		{`{"session":"k","locks":[],"wait":10}`, "not a Go duration string"},
		{`{"session":"k","locks":[],"wait":"10 s"}`, "bad duration"},
		{`{"session":true,"locks":[]}`, "is not a string"},
	} {
		err := json.Unmarshal([]byte(tc.body), &req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.body, err, tc.want)
		}
	}
}
