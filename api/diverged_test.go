package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockd/lockd/api/wire"
)

// A node whose state diverged (the marker raftnode writes when its digest
// differs from the leader's) answers nothing from its table, after a
// restart too: reads and writes get 503 diverged; its status says why.
func TestDivergedNodeAnswersNothingFromItsTable(t *testing.T) {
	dir := t.TempDir()
	n := singleNode(t, nodeOptions{dir: dir})
	created := n.do(http.MethodPost, "/v1/sessions", map[string]any{"ttl": "1m"})
	if created.status != http.StatusCreated {
		t.Fatalf("create session: %v", created)
	}
	var sess wire.Session
	if err := json.Unmarshal(created.body, &sess); err != nil {
		t.Fatal(err)
	}
	if r := n.do(http.MethodPut, "/v1/locks/a?session="+string(sess.ID), nil); r.status != http.StatusOK {
		t.Fatalf("acquire: %v", r)
	}
	n.stop()
	marker := "at applied index 5 this node's table digest is 00, leader n2's is ff"
	if err := os.WriteFile(filepath.Join(dir, "DIVERGED"), []byte(marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n = startNode(t, "n1", nil, nodeOptions{dir: dir})
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/sessions/" + string(sess.ID)},
		{http.MethodGet, "/v1/sessions"},
		{http.MethodGet, "/v1/locks"},
		{http.MethodGet, "/v1/locks/a"},
		{http.MethodGet, "/v1/locks/a?stale"},
		{http.MethodGet, "/v1/check?name=a"},
		{http.MethodPost, "/v1/sessions"},
		{http.MethodPut, "/v1/locks/b?session=" + string(sess.ID)},
		{http.MethodDelete, "/v1/locks/a?session=" + string(sess.ID)},
	} {
		r := n.do(c.method, c.path, nil)
		if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"diverged"`) {
			t.Errorf("%s %s on a diverged node: %v", c.method, c.path, r)
		}
		if strings.Contains(string(r.body), string(sess.ID)) {
			t.Errorf("%s %s named the table's session: %v", c.method, c.path, r)
		}
	}
	r := n.do(http.MethodGet, "/v1/status", nil)
	var st wire.StatusResponse
	if err := json.Unmarshal(r.body, &st); err != nil || r.status != http.StatusOK || st.Diverged != marker {
		t.Fatalf("status of a diverged node: %v (%v)", r, err)
	}
}
