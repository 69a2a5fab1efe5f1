package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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
	ns := threeNodes(t, nodeOptions{})
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
		follower.must(http.StatusOK, "POST", "/v1/acquire", map[string]any{"session": s, "locks": locks}, nil)
	}
	// Elections may have moved the leader meanwhile (tests run at a tenth
	// of raft's timeouts): close through whichever node follows now.
	waitFor(t, 15*time.Second, "a follower with a leader", func() bool {
		for _, n := range ns {
			if st := n.status(); st.State == "follower" && st.Leader.ID != "" {
				follower = n
				return true
			}
		}
		return false
	})
	var closed wire.CloseSessionResponse
	r := follower.must(http.StatusOK, "DELETE", "/v1/sessions/"+s, nil, &closed)
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
