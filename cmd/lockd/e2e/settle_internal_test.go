//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// script is a fake node: each "METHOD /path" (without the query) answers
// its listed replies in turn (the last one from then on), and every
// request's body is kept. NAME in a reply stands for the name the first
// POST /v1/sessions asked for (the client makes it unique).
type script struct {
	mu      sync.Mutex
	replies map[string][]reply
	bodies  map[string][]map[string]any
}

type reply struct {
	status int
	body   string
}

const (
	unknownOutcome = `{"error":{"code":"no_leader","message":"the outcome of the write is unknown"}}`
	notApplied     = `{"error":{"code":"no_leader","message":"no leader yet; nothing was done, retry","not_applied":true}}`
	quorumLost     = `{"error":{"code":"no_leader","message":"no leader: 1 of 3 voters reachable","not_applied":true,"quorum_lost":true}}`
)

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	var body map[string]any
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &body)
	s.mu.Lock()
	s.bodies[key] = append(s.bodies[key], body)
	rs := s.replies[key]
	if len(rs) == 0 {
		s.mu.Unlock()
		http.Error(w, `{"error":{"code":"internal","message":"no reply scripted for `+key+`"}}`, http.StatusInternalServerError)
		return
	}
	next := rs[0]
	if len(rs) > 1 {
		s.replies[key] = rs[1:]
	}
	if created := s.bodies["POST /v1/sessions"]; len(created) > 0 {
		next.body = strings.ReplaceAll(next.body, "NAME", fmt.Sprint(created[0]["name"]))
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(next.status)
	fmt.Fprint(w, next.body)
}

// TestClientSettlesUnknownOutcomes: the e2e client resends what the API
// says may be resent, settles an unknown outcome by request id or by a
// read, answers a lost quorum at once, and a sendOnce client sends once.
func TestClientSettlesUnknownOutcomes(t *testing.T) {
	held := func(count int) string {
		return fmt.Sprintf(`{"name":"x","holders":[{"session":"s","mode":"write","count":%d,"token":7}]}`, count)
	}
	granted := `{"status":"granted","request_id":"?","session":"s","token":7,"granted":[{"name":"x","mode":"write","token":7}]}`
	for _, tc := range []struct {
		name    string
		once    bool
		replies map[string][]reply
		run     func(ctx context.Context, c *client, addr string) error
		wantErr string         // "" for success
		sent    map[string]int // requests per key
	}{
		{"acquire resent with its request id", false,
			map[string][]reply{"POST /v1/acquire": {{503, unknownOutcome}, {200, granted}}},
			acquireX, "", map[string]int{"POST /v1/acquire": 2}},
		{"acquire with the quorum lost", false,
			map[string][]reply{"POST /v1/acquire": {{503, quorumLost}}},
			acquireX, "1 of 3 voters", map[string]int{"POST /v1/acquire": 1}},
		{"send once", true,
			map[string][]reply{"POST /v1/acquire": {{503, notApplied}}},
			acquireX, "nothing was done", map[string]int{"POST /v1/acquire": 1}},
		{"release not applied is resent", false,
			map[string][]reply{"POST /v1/release": {{503, notApplied}, {200, `{"released":[{"name":"x"}]}`}}},
			releaseX, "", map[string]int{"POST /v1/release": 2, "GET /v1/locks/x": 0}},
		{"release applied: read, not resent", false,
			map[string][]reply{"POST /v1/release": {{503, unknownOutcome}},
				"GET /v1/locks/x": {{404, `{"error":{"code":"lock_not_found","message":"no"}}`}}},
			releaseX, "", map[string]int{"POST /v1/release": 1, "GET /v1/locks/x": 1}},
		{"release not applied: still held once, resent", false,
			map[string][]reply{"POST /v1/release": {{503, unknownOutcome}, {200, `{"released":[{"name":"x"}]}`}},
				"GET /v1/locks/x": {{200, held(1)}}},
			releaseX, "", map[string]int{"POST /v1/release": 2, "GET /v1/locks/x": 1}},
		{"release applied late: the resend finds it not held", false,
			map[string][]reply{"POST /v1/release": {{503, unknownOutcome}, {409, `{"error":{"code":"not_held","message":"no"}}`}},
				"GET /v1/locks/x": {{200, held(1)}}},
			releaseX, "", map[string]int{"POST /v1/release": 2, "GET /v1/locks/x": 1}},
		{"release of a reentrant hold cannot be settled", false,
			map[string][]reply{"POST /v1/release": {{503, unknownOutcome}}, "GET /v1/locks/x": {{200, held(2)}}},
			releaseX, "held 2 times", map[string]int{"POST /v1/release": 1, "GET /v1/locks/x": 1}},
		{"release refused at first", false,
			map[string][]reply{"POST /v1/release": {{409, `{"error":{"code":"not_held","message":"no"}}`}}},
			releaseX, "not_held", map[string]int{"POST /v1/release": 1}},
		{"session created by the first attempt", false,
			map[string][]reply{"POST /v1/sessions": {{503, unknownOutcome}},
				"GET /v1/sessions": {{200, `[{"id":"other","name":"x"},{"id":"mine","name":"NAME"}]`}}},
			sessionNamedNAME, "", map[string]int{"POST /v1/sessions": 1, "GET /v1/sessions": 1}},
		{"session not created by the first attempt", false,
			map[string][]reply{"POST /v1/sessions": {{503, unknownOutcome}, {201, `{"id":"mine","name":"NAME"}`}},
				"GET /v1/sessions": {{200, `[]`}}},
			sessionNamedNAME, "", map[string]int{"POST /v1/sessions": 2, "GET /v1/sessions": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{replies: tc.replies, bodies: map[string][]map[string]any{}}
			srv := httptest.NewServer(s)
			defer srv.Close()
			c := newClient()
			if tc.once {
				c = c.sendOnce()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			err := tc.run(ctx, c, strings.TrimPrefix(srv.URL, "http://"))
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			for key, n := range tc.sent {
				if len(s.bodies[key]) != n {
					t.Errorf("%s sent %d times, want %d", key, len(s.bodies[key]), n)
				}
			}
			if acq := s.bodies["POST /v1/acquire"]; len(acq) > 1 && acq[0]["request_id"] != acq[1]["request_id"] {
				t.Errorf("acquire resent with request ids %v and %v", acq[0]["request_id"], acq[1]["request_id"])
			}
		})
	}
}

func acquireX(ctx context.Context, c *client, addr string) error {
	_, err := c.acquire(ctx, addr, "s", "", "x", "")
	return err
}

func releaseX(ctx context.Context, c *client, addr string) error {
	return c.release(ctx, addr, "s", "x")
}

// sessionNamedNAME creates a session, which the script calls NAME, and
// wants the id "mine".
func sessionNamedNAME(ctx context.Context, c *client, addr string) error {
	id, err := c.createSession(ctx, addr, "10s")
	if err == nil && id != "mine" {
		return fmt.Errorf("session %q, want mine", id)
	}
	return err
}
