package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/wire"
)

// TestCloseBigSessionThroughFollower: closing a session whose answer is
// many megabytes (every name it held: over 4 MiB between the nodes and to
// the client) through a follower comes back whole, not as an unknown
// outcome whose retry finds no session and lists nothing.
func TestCloseBigSessionThroughFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("acquires 30k locks")
	}
	// The close's apply, its 6 MB answer's encoding and its trip through
	// the follower take 0.6 s, but 9-11 s under the race detector on two
	// busy cores (measured), past the default 10 s ProposeTimeout. The
	// test is about the answer arriving whole, not about its speed.
	ns := threeNodes(t, nodeOptions{api: func(c *api.Config) { c.ProposeTimeout = 2 * time.Minute }})
	follower := ns[1]
	s := follower.session(map[string]any{"ttl": "60s"})
	pad := strings.Repeat("p", 100) + "/" + strings.Repeat("q", 100)
	const batches, per = 469, 64 // 30,016 names of ~210 bytes: a 6+ MB answer
	want := make(map[string]bool, batches*per)
	for b := range batches {
		locks := make([]map[string]any, per)
		for i := range locks {
			name := fmt.Sprintf("big/%s-%05d", pad, b*per+i)
			locks[i], want[name] = map[string]any{"name": name}, true
		}
		// An election under load answers 503 (nothing done, or an
		// outcome the same request_id settles): a client retries.
		body := map[string]any{"session": s, "locks": locks, "request_id": fmt.Sprintf("big-%d", b)}
		waitFor(t, 30*time.Second, fmt.Sprintf("batch %d granted", b), func() bool {
			r := follower.do("POST", "/v1/acquire", body)
			if r.status != http.StatusOK && r.status != http.StatusServiceUnavailable {
				t.Fatalf("POST /v1/acquire: got %s, want 200 (or 503 during an election)", r)
			}
			return r.status == http.StatusOK
		})
	}
	// Elections may have moved the leader meanwhile: close through
	// whichever node follows now, again when an election answered 503
	// with nothing done. An unknown outcome is what the test is about:
	// it fails.
	var r resp
	waitFor(t, 30*time.Second, "the close through a follower with a leader", func() bool {
		follower = nil
		for _, n := range ns {
			if st := n.status(); st.State == "follower" && st.Leader.ID != "" {
				follower = n
			}
		}
		if follower == nil {
			return false
		}
		r = follower.do("DELETE", "/v1/sessions/"+s, nil)
		return !notApplied(r)
	})
	var closed wire.CloseSessionResponse
	if r.status != http.StatusOK {
		t.Fatalf("DELETE /v1/sessions/%s through %s: got %s, want 200", s, follower.id, r)
	}
	if err := json.Unmarshal(r.body, &closed); err != nil {
		t.Fatalf("decode the close's answer: %v", err)
	}
	if len(r.body) <= 4<<20 {
		t.Fatalf("the answer takes %d bytes; the test wants more than 4 MiB", len(r.body))
	}
	for _, rl := range closed.Released {
		if !want[rl.Name] {
			t.Fatalf("released %q: not held, or listed twice", rl.Name)
		}
		delete(want, rl.Name)
	}
	if len(want) > 0 {
		t.Fatalf("close through a follower listed %d released names; %d held names are missing", len(closed.Released), len(want))
	}
	follower.mustErr(http.StatusNotFound, "session_not_found", "GET", "/v1/sessions/"+s, nil)
}

// notApplied reports whether r is a 503 that says nothing was done
// (not_applied), which a client may simply send again.
func notApplied(r resp) bool {
	var body struct {
		Error struct {
			NotApplied bool `json:"not_applied"`
		} `json:"error"`
	}
	return r.status == http.StatusServiceUnavailable && json.Unmarshal(r.body, &body) == nil && body.Error.NotApplied
}
