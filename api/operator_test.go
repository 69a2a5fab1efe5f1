package api_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/client/clienttest"
)

// Over HTTPS the endpoints that change the cluster (leave, member
// removal) answer only a client that presents an operator's certificate
// signed by the cluster's CA; clients without one get 401, a non-member's
// node certificate 403, and nothing happens.
func TestOperatorEndpointsNeedAClientCertificate(t *testing.T) {
	var left atomic.Int32
	n := singleNode(t, nodeOptions{api: func(cfg *api.Config) {
		cfg.OperatorCert = true
		cfg.Leave = func() { left.Add(1) }
	}})
	srv, files := clienttest.NewTLSServer(t, n.srv, false)
	post := func(method, path, cert, key string) int {
		t.Helper()
		conf, err := client.TLSConfig(files.CA, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("DELETE", "/v1/members/n9", "", ""); got != http.StatusUnauthorized {
		t.Errorf("member removal without a certificate: %d, want 401", got)
	}
	if got := post("POST", "/v1/agent/leave", "", ""); got != http.StatusUnauthorized || left.Load() != 0 {
		t.Fatalf("leave without a certificate: %d (left %d times), want 401 and no leave", got, left.Load())
	}
	if got := post("GET", "/v1/status", "", ""); got != http.StatusOK {
		t.Errorf("status without a certificate: %d, want 200", got)
	}
	// A node certificate of the CA for a name that is not a server of
	// the configuration ("node"; the server is n1) is no operator's.
	if got := post("DELETE", "/v1/members/n9", files.NodeCert, files.NodeKey); got != http.StatusForbidden {
		t.Errorf("member removal with a non-member's node certificate: %d, want 403", got)
	}
	if got := post("POST", "/v1/agent/leave", files.NodeCert, files.NodeKey); got != http.StatusForbidden || left.Load() != 0 {
		t.Fatalf("leave with a non-member's node certificate: %d (left %d times), want 403 and no leave", got, left.Load())
	}
	if got := post("POST", "/v1/agent/leave", files.Cert, files.Key); got != http.StatusAccepted {
		t.Fatalf("leave with a client certificate: %d, want 202", got)
	}
}

// The clock hook (lockd --test-clock-hook) exists only when it is
// configured; it sets the offset it is given and refuses anything else
// without changing it.
func TestClockHook(t *testing.T) {
	off := singleNode(t, nodeOptions{})
	off.mustErr(http.StatusNotFound, "not_found", "PUT", "/v1/debug/clock", map[string]string{"offset": "1h"})

	var offset atomic.Int64
	n := singleNode(t, nodeOptions{api: func(cfg *api.Config) { cfg.ClockOffset = &offset }})
	n.must(http.StatusOK, "PUT", "/v1/debug/clock", map[string]string{"offset": "-90s"}, nil)
	if got := time.Duration(offset.Load()); got != -90*time.Second {
		t.Fatalf("offset %v after PUT -90s", got)
	}
	for _, body := range []any{map[string]string{"offset": "soon"}, map[string]any{"offset": 5},
		map[string]string{"offset": "1s", "wall": "2026-01-01T00:00:00Z"}, map[string]string{"skew": "1s"},
		map[string]string{"offset": "9000h"}, map[string]string{"offset": "-9000h"}} {
		n.mustErr(http.StatusBadRequest, "invalid_request", "PUT", "/v1/debug/clock", body)
	}
	var got struct{ Offset string }
	n.must(http.StatusOK, "GET", "/v1/debug/clock", nil, &got)
	if got.Offset != "-1m30s" {
		t.Fatalf("GET after refused PUTs: offset %q, want -1m30s", got.Offset)
	}
}
