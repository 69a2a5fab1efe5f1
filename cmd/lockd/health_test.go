package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/client/clienttest"
	"github.com/lockd/lockd/api/wire"
)

// health and leave reach a node that requires client certificates with
// their flags, their env, or the node's own files in LOCKD_TLS_*; the
// flags win over the node's files.
func TestHealthAndLeaveTLS(t *testing.T) {
	var left atomic.Int32
	srv, f := clienttest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/status":
			json.NewEncoder(w).Encode(wire.StatusResponse{NodeID: "n1", State: "leader", Leader: wire.Leader{ID: "n1"}})
		case "POST /v1/agent/leave":
			left.Add(1)
			w.Write([]byte("{}"))
		default:
			http.NotFound(w, r)
		}
	}), true)
	addr := srv.Listener.Addr().String()
	nodeFiles := map[string]string{"LOCKD_TLS_CA": f.CA, "LOCKD_TLS_CERT": f.NodeCert, "LOCKD_TLS_KEY": f.NodeKey}
	clientFiles := map[string]string{client.EnvCACert: f.CA, client.EnvClientCert: f.Cert, client.EnvClientKey: f.Key}
	for _, tc := range []struct {
		name string
		env  map[string]string // set on top of empty TLS variables
		args []string
		want int
	}{
		{"flags", nil, []string{"--ca-cert", f.CA, "--client-cert", f.Cert, "--client-key", f.Key}, 0},
		{"client env", clientFiles, nil, 0},
		{"node files", nodeFiles, nil, 0},
		{"flags over node files", nodeFiles, []string{"--ca-cert", f.CA}, 1},
		{"plain http", nil, nil, 1},
		{"no CA", nil, []string{"--client-cert", f.Cert, "--client-key", f.Key}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"LOCKD_TLS_CA", "LOCKD_TLS_CERT", "LOCKD_TLS_KEY",
				client.EnvCACert, client.EnvClientCert, client.EnvClientKey} {
				t.Setenv(name, "")
			}
			for name, file := range tc.env {
				t.Setenv(name, file)
			}
			args := append([]string{"--addr", addr}, tc.args...)
			if got := health(append(args, "--quiet")); got != tc.want {
				t.Errorf("health: exit %d, want %d", got, tc.want)
			}
			before := left.Load()
			code := leave(args)
			if code != tc.want || (code == 0) != (left.Load() == before+1) {
				t.Errorf("leave: exit %d, want %d; %d leave requests", code, tc.want, left.Load()-before)
			}
		})
	}
}

// lockd leave sends its request again while the node answers 503
// not_applied (no leader took it: an election), and only then: any other
// failure is reported at once.
func TestLeaveResendsWhatWasNotApplied(t *testing.T) {
	for _, tc := range []struct {
		notApplied bool
		code, sent int32
	}{{true, 0, 3}, {false, 1, 1}} {
		var sent atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method+" "+r.URL.Path != "POST /v1/agent/leave" {
				http.NotFound(w, r)
				return
			}
			if sent.Add(1) < 3 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeNoLeader,
					Message: "electing", NotApplied: tc.notApplied}})
				return
			}
			w.Write([]byte("{}"))
		}))
		code := leave([]string{"--addr", srv.Listener.Addr().String()})
		srv.Close()
		if int32(code) != tc.code || sent.Load() != tc.sent {
			t.Errorf("not_applied %v: exit %d after %d sends, want %d after %d", tc.notApplied, code, sent.Load(), tc.code, tc.sent)
		}
	}
}
