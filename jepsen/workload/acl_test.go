//go:build linux

package workload_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/history"
	"github.com/lockd/lockd/jepsen/workload"
)

// fakeACL answers the bootstrap with the given steps in turn ("lost": the
// connection closes after the bootstrap committed; "503"; "ok"; "403"),
// and token creations with 201.
func fakeACL(t *testing.T, steps ...string) *httptest.Server {
	var n, committed atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/acl/bootstrap":
			step := steps[min(int(n.Add(1))-1, len(steps)-1)]
			if committed.Load() > 0 && step != "503" {
				step = "403"
			}
			switch step {
			case "lost":
				committed.Add(1)
				conn, _, _ := w.(http.Hijacker).Hijack()
				conn.Close()
			case "503":
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`{"error":{"code":"no_leader","message":"no leader"}}`))
			case "403":
				w.WriteHeader(http.StatusForbidden)
				w.Write([]byte(`{"error":{"code":"forbidden","message":"ACLs were bootstrapped at index 4; bootstrap is allowed once"}}`))
			default:
				committed.Add(1)
				w.Write([]byte(`{"id":"root","secret":"root-secret"}`))
			}
		case "/v1/acl/tokens":
			var body struct {
				Rules []struct{ Prefix, Access string }
			}
			json.NewDecoder(r.Body).Decode(&body)
			if r.Header.Get("Authorization") != "Bearer root-secret" || len(body.Rules) != 1 ||
				body.Rules[0].Prefix != workload.TokenPrefix || body.Rules[0].Access != "write" {
				t.Errorf("token creation: %q %+v", r.Header.Get("Authorization"), body)
			}
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id":"t","secret":"s-` + r.URL.Path + `"}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The bootstrap secret is taken from a 200 answer only; a 403 "already
// bootstrapped" after an attempt whose answer was lost is
// ErrBootstrapLost (the harness then starts a fresh cluster); the same
// 403 with no lost attempt before is an error of its own.
func TestSetupACLBootstrapRetries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := fakeACL(t, "503", "ok")
	toks, err := workload.SetupACL(ctx, srv.Client(), srv.URL, 3)
	if err != nil || toks.Admin != "root-secret" || len(toks.Workers) != 3 || toks.Intruder == "" {
		t.Fatalf("503 then ok: %+v %v", toks, err)
	}
	srv = fakeACL(t, "lost")
	if _, err := workload.SetupACL(ctx, srv.Client(), srv.URL, 3); !errors.Is(err, workload.ErrBootstrapLost) {
		t.Fatalf("lost answer then 403: %v", err)
	}
	srv = fakeACL(t, "403")
	if _, err := workload.SetupACL(ctx, srv.Client(), srv.URL, 3); err == nil || errors.Is(err, workload.ErrBootstrapLost) ||
		!strings.Contains(err.Error(), "bootstrapped") {
		t.Fatalf("a cluster bootstrapped before: %v", err)
	}
}

// Against a real lockd --acl, the intruder's attempts through the
// workers' sessions are refused and Ownership finds the run valid; with
// the management token (the intruder-admin negative control) they are
// accepted, workers lose sessions and requests, and Ownership flags it.
func TestIntruderAgainstRealLockd(t *testing.T) {
	addr := startDev(t, "--acl")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	toks, err := workload.SetupACL(ctx, http.DefaultClient, "http://"+addr, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, admin := range []bool{false, true} {
		intruder := toks.Intruder
		if admin {
			intruder = toks.Admin
		}
		results, events := runWorkloadEnv(t, addr, "mutex", 6*time.Second, func(env *workload.Env) {
			env.Tokens, env.Intruder, env.Observer = toks.Workers, intruder, toks.Admin
		})
		var own checker.Result
		for _, r := range results {
			if r.Checker == "ownership" {
				own = r
			} else if !r.OK() && !admin {
				t.Errorf("%s: %s %v", r.Checker, r.Verdict, r.Anomalies)
			}
		}
		t.Logf("admin=%v: ownership %s %v %v", admin, own.Verdict, own.Counts, first(own.Anomalies, 3))
		switch {
		case !admin && (own.Verdict != checker.Valid || own.Counts["forbidden"]+own.Counts["refused_alive"] == 0):
			t.Errorf("refused intruder: %+v", own)
		case admin && (own.Verdict != checker.Invalid || own.Counts["accepted"] == 0):
			t.Errorf("intruder with the management token not flagged: %+v", own)
		}
		t.Logf("admin=%v: cancels tried %d, acquires ended cancelled %d", admin, countIntrusions(events, "cancel"), cancelled(events))
		if !admin && cancelled(events) > 0 {
			t.Errorf("a refused intruder's cancel ended a worker's acquire")
		}
		if n := countIntrusions(events, "cancel"); n == 0 {
			t.Errorf("admin=%v: no cancel was attempted", admin)
		}
	}
}

// cancelled counts the acquires that ended "cancelled".
func cancelled(events []history.Event) int {
	n := 0
	for _, e := range events {
		if e.F == history.Acquire && e.Type == history.Fail && e.Error == "cancelled" {
			n++
		}
	}
	return n
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }
