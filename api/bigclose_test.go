package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/lockd/lockd/api"
)

// TestCloseBigSessionThroughFollower: closing a session whose answer is
// many megabytes (every name it held) through a follower comes back whole,
// not as an unknown outcome whose retry finds no session.
func TestCloseBigSessionThroughFollower(t *testing.T) {
	if testing.Short() {
		t.Skip("acquires 24k locks")
	}
	follower := threeNodes(t, nodeOptions{})[1]
	s := follower.session(map[string]any{"ttl": "60s"})
	pad := strings.Repeat("p", 100) + "/" + strings.Repeat("q", 100)
	const batches, per = 375, 64 // 24,000 names of ~210 bytes: a 5+ MB answer
	for b := range batches {
		locks := make([]map[string]any, per)
		for i := range locks {
			locks[i] = map[string]any{"name": fmt.Sprintf("big/%s-%05d", pad, b*per+i)}
		}
		follower.must(http.StatusOK, "POST", "/v1/acquire", map[string]any{"session": s, "locks": locks}, nil)
	}
	var closed api.CloseSessionResponse
	follower.must(http.StatusOK, "DELETE", "/v1/sessions/"+s, nil, &closed)
	if len(closed.Released) != batches*per {
		t.Fatalf("close through a follower listed %d released names, want %d", len(closed.Released), batches*per)
	}
}
