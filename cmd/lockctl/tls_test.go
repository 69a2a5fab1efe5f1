//go:build linux

package main

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/client/clienttest"
)

// tlsNode is an HTTPS node requiring client certificates that answers
// /v1/status (leading itself) and /v1/sessions (one session, "s-tls").
func tlsNode(t *testing.T) (addr string, f clienttest.TLSFiles) {
	srv, f := clienttest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v any
		switch r.URL.Path {
		case "/v1/status":
			v = client.Status{NodeID: "n1", State: "leader", Leader: client.Leader{ID: "n1", HTTPAddr: r.Host},
				Members: []client.Member{{ID: "n1", HTTPAddr: r.Host, Voter: true}}}
		case "/v1/sessions":
			v = []map[string]string{{"id": "s-tls"}}
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}), true)
	return srv.Listener.Addr().String(), f
}

// The TLS flags and their environment variables reach every command
// (status and session list here).
func TestTLSFlags(t *testing.T) {
	addr, f := tlsNode(t)
	flags := []string{"--addr", addr, "--ca-cert", f.CA, "--client-cert", f.Cert, "--client-key", f.Key}
	for _, tc := range []struct {
		name string
		args []string
		env  bool
		code int
		want string // in stdout, or in stderr when code is not 0
	}{
		{"status", append([]string{"status"}, flags...), false, exitOK, "n1 (leader)"},
		{"session list", append([]string{"session", "list"}, flags...), false, exitOK, "s-tls"},
		{"status from env", []string{"status"}, true, exitOK, "n1 (leader)"},
		{"session list from env", []string{"session", "list"}, true, exitOK, "s-tls"},
		{"no client certificate", []string{"status", "--addr", addr, "--ca-cert", f.CA}, false,
			exitUnavailable, "certificate required"},
		{"no CA", []string{"session", "list", "--addr", addr, "--client-cert", f.Cert, "--client-key", f.Key}, false,
			exitUnavailable, "failed to verify certificate"},
		{"plain http", []string{"status", "--addr", addr}, false, exitConfig, "pass --ca-cert FILE (or set LOCKD_CACERT)"},
		{"key missing", []string{"status", "--addr", addr, "--client-cert", f.Cert}, false,
			exitUsage, "--client-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []struct{ name, file string }{
				{client.EnvAddr, addr}, {client.EnvCACert, f.CA}, {client.EnvClientCert, f.Cert}, {client.EnvClientKey, f.Key},
			} {
				if !tc.env {
					v.file = ""
				}
				t.Setenv(v.name, v.file)
			}
			var stdout, stderr strings.Builder
			code := run(tc.args, &stdout, &stderr)
			out := stdout.String()
			if code != exitOK {
				out = stderr.String()
			}
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tc.code, tc.want, &stdout, &stderr)
			}
		})
	}
}

// A real `lockd --dev` with TLS and client certificates required: lockctl
// runs a job under a lock and lists it with the flags, and is refused
// without them.
func TestTLSDevNode(t *testing.T) {
	needBinaries(t)
	pki := t.TempDir()
	if out, err := exec.Command(lockdBin, "tls", "init", "--out", pki, "--node", "dev", "--client", "ops").CombinedOutput(); err != nil {
		t.Fatalf("lockd tls init: %v\n%s", err, out)
	}
	addr, _ := startDevProc(t, pki)
	flags := []string{"--ca-cert", filepath.Join(pki, "ca.pem"),
		"--client-cert", filepath.Join(pki, "ops.pem"), "--client-key", filepath.Join(pki, "ops-key.pem")}
	code, out, stderr := lockctl(t, addr, append(append([]string{"lock"}, flags...), "jobs/tls", "--", "sh", "-c", "echo token $LOCKD_FENCING_TOKEN")...)
	if code != exitOK || !strings.HasPrefix(out, "token ") {
		t.Fatalf("lock: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = lockctl(t, addr, append([]string{"session", "list"}, flags...)...)
	if code != exitOK || !strings.HasPrefix(out, "ID") {
		t.Fatalf("session list: exit %d\n%s%s", code, out, stderr)
	}
	code, _, stderr = lockctl(t, addr, "status", "--ca-cert", flags[1])
	if code != exitUnavailable || !strings.Contains(stderr, "certificate required") {
		t.Fatalf("status without a client certificate: exit %d\n%s", code, stderr)
	}
}
