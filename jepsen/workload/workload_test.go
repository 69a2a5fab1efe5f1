//go:build linux

package workload_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/jepsen/checker"
	"github.com/lockd/lockd/jepsen/history"
	"github.com/lockd/lockd/jepsen/resource"
	"github.com/lockd/lockd/jepsen/workload"
)

// startDev runs `lockd --dev` on a free port and returns its address.
func startDev(t *testing.T, flags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the lockd binary (not built with -short)")
	}
	addr := fmt.Sprintf("127.0.0.1:%d", lockdtest.FreePorts(t, 1)[0])
	args := append([]string{"--dev", "--data-dir", t.TempDir(), "--http-addr", addr, "--log-level", "error",
		"--raft-timing", lockdtest.TimingFlag(0.1)}, flags...)
	cmd := exec.Command(lockdBin, args...) // killed: its own data dir would stay
	if err := lockdtest.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); lockdtest.Exited(cmd) })
	for i := 0; ; i++ {
		resp, err := http.Get("http://" + addr + "/v1/status")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return addr
			}
		}
		if i == 100 {
			t.Fatalf("lockd --dev on %s did not start: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runWorkload drives name against a dev node for d, with one client
// pause past the TTL when pause is set, and returns the checkers'
// results and the events.
func runWorkload(t *testing.T, addr, name string, fenced, pause bool, d time.Duration) ([]checker.Result, []history.Event) {
	t.Helper()
	return runWorkloadEnv(t, addr, name, d, func(env *workload.Env) {
		env.Res = resource.New(fenced)
		if pause {
			env.Pauses = &workload.Pauses{}
		}
	})
}

// runWorkloadEnv is runWorkload with the Env (fenced resource, no client
// pause) changed by set.
func runWorkloadEnv(t *testing.T, addr, name string, d time.Duration, set func(*workload.Env)) ([]checker.Result, []history.Event) {
	t.Helper()
	w, err := workload.New(name)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := history.NewRecorder("")
	if err != nil {
		t.Fatal(err)
	}
	// Sessions of 3 s: keepalives every second survive a machine loaded
	// enough to starve a goroutine for most of a second (with 1 s, sessions
	// expired with no fault to explain it, which ownership rightly flags).
	env := &workload.Env{Rec: rec, Res: resource.New(true), Endpoints: []string{addr}, TTL: 3 * time.Second,
		Wait: 2 * time.Second, Hold: 20 * time.Millisecond, Seed: 1}
	set(env)
	res, pause := env.Res, env.Pauses != nil
	cs, err := workload.NewClients(env, w, 4)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if pause {
		go func() {
			time.Sleep(d / 4)
			pctx, pcancel := context.WithTimeout(ctx, d/2)
			defer pcancel()
			// Past the session TTL: the session expires during the pause.
			who, err := env.Pauses.Pause(pctx, env.TTL+1500*time.Millisecond)
			rec.Add(history.Event{Type: history.Info, Process: history.Nemesis, F: history.Start,
				Fault: "client-pause", Targets: []string{who}, Error: fmt.Sprint(err)})
		}()
	}
	cs.Run(ctx)
	rec.Add(history.Event{Type: history.Info, Process: history.Harness, F: history.Phase, Fault: "final"})
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	cs.Final(fctx, 10*time.Second)
	cs.Close(fctx)
	workload.FinalRead(rec, res)
	events := rec.Events()
	return checker.All(events, checker.Config{Workload: name, Limit: w.Limit(), Fenced: res.Fenced(),
		LinearizabilityTimeout: time.Minute, LivenessBound: 10 * time.Second, Intruder: env.Intruder != "",
		SessionTTL: env.TTL}), events
}

// countIntrusions counts the intruder's attempts of kind what.
func countIntrusions(events []history.Event, what string) int {
	n := 0
	for _, e := range events {
		if e.F == history.Intrude && e.Type == history.Invoke && len(e.Names) > 0 && e.Names[0] == what {
			n++
		}
	}
	return n
}

func count(events []history.Event, f string, typ history.Type) int {
	n := 0
	for _, e := range events {
		if e.F == f && e.Type == typ {
			n++
		}
	}
	return n
}

// Every workload, against a real (single) lockd, records a history that
// every checker finds valid, with grants and resource uses in it.
func TestWorkloadsValidAgainstRealLockd(t *testing.T) {
	addr := startDev(t)
	for _, name := range workload.Names {
		t.Run(name, func(t *testing.T) {
			results, events := runWorkload(t, addr, name, true, false, 2*time.Second)
			for _, r := range results {
				if !r.OK() {
					t.Errorf("%s: %s %v", r.Checker, r.Verdict, r.Anomalies)
				}
			}
			if n := count(events, history.Acquire, history.OK); n < 4 {
				t.Errorf("only %d grants", n)
			}
			if name != "multi" && name != "deadlock" && count(events, history.Observe, history.OK) == 0 {
				t.Errorf("no observe read")
			}
			if name == "deadlock" && count(events, history.Acquire, history.Fail) == 0 {
				t.Logf("no deadlock in this short run (grants %d)", count(events, history.Acquire, history.OK))
			}
		})
	}
}

// A client paused past its TTL (a GC pause) comes back and writes with
// its old token: the fenced resource refuses it and the history stays
// valid; the same pause against an unfenced resource loses an
// acknowledged element, which the checkers flag.
func TestClientPauseIsFencedAndUnfencedIsCaught(t *testing.T) {
	addr := startDev(t)
	results, events := runWorkload(t, addr, "mutex", true, true, 8*time.Second)
	for _, r := range results {
		if !r.OK() {
			t.Errorf("fenced: %s: %s %v", r.Checker, r.Verdict, r.Anomalies)
		}
	}
	if n := count(events, history.ResWrite, history.Fail); n == 0 {
		t.Errorf("fenced: the paused client's write was not refused (lost sessions: %d)", count(events, history.Lost, history.Info))
	}

	results, _ = runWorkload(t, addr, "mutex", false, true, 8*time.Second)
	flagged := false
	for _, r := range results {
		if r.Verdict == checker.Invalid {
			flagged = true
			t.Logf("unfenced flagged by %s: %v", r.Checker, r.Anomalies)
		}
	}
	if !flagged {
		t.Error("unfenced resource with a client paused past its TTL: no checker flagged it")
	}
}

// holdTTLRun runs the mutex workload with hold TTLs against lockd --dev
// started with flags: holders now and then overstay their grant and look
// at it. It returns the hold-ttl checker's result, every checker's, and
// the history.
func holdTTLRun(t *testing.T, flags ...string) (*checker.Result, []checker.Result, []history.Event) {
	t.Helper()
	addr := startDev(t, flags...)
	results, events := runWorkloadEnv(t, addr, "mutex", 12*time.Second, func(env *workload.Env) {
		env.HoldTTL = 300 * time.Millisecond
	})
	for i, r := range results {
		if r.Checker == "hold-ttl" {
			return &results[i], results, events
		}
	}
	t.Fatal("no hold-ttl checker in a run with hold TTLs")
	return nil, nil, nil
}

// Against lockd the hold of a holder that overstays its grant is gone
// (the release finds nothing held) and every checker finds the history
// valid (TestUnsafeHoldPastTTLIsCaught: the hold-ttl checker flags a
// lockd that keeps it).
func TestHoldPastTTLEnds(t *testing.T) {
	_, results, events := holdTTLRun(t)
	for _, r := range results {
		if !r.OK() {
			t.Errorf("%s: %s %v", r.Checker, r.Verdict, r.Anomalies)
		}
	}
	if count(events, history.Release, history.Fail) == 0 {
		t.Error("no holder overstayed its grant (no release found its hold gone)")
	}
}

// The final round ends by itself even when the cluster cannot be reached
// (found in review: it used to retry session creation until a signal).
func TestFinalRoundIsBounded(t *testing.T) {
	rec, _ := history.NewRecorder("")
	env := &workload.Env{Rec: rec, Res: resource.New(true), Endpoints: []string{"127.0.0.1:1"},
		TTL: time.Second, Wait: 100 * time.Millisecond, Hold: time.Millisecond}
	w, _ := workload.New("mutex")
	cs, err := workload.NewClients(env, w, 2)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cs.Final(context.Background(), 500*time.Millisecond); close(done) }()
	select {
	case <-done:
	case <-time.After(2*500*time.Millisecond + 5*time.Second + 2*time.Second):
		t.Fatal("Final(wait=500ms) against an unreachable cluster did not end")
	}
}

// A client gives up on a session whose keepalives fail a margin before
// the cluster expires it, and its Close then sends nothing; the worker
// deletes the session itself, so that its close's ok means what the
// checkers take it to mean: the holds are gone (history.Lost). Here a
// proxy answers every keepalive 503 but passes it on, so the cluster
// keeps the session while the client gives up on it. The node
// advertises the proxy, which the client follows as the leader.
func TestLostSessionIsDeletedAtClose(t *testing.T) {
	refused := make(chan string, 100) // sessions whose keepalives were refused
	deleted := make(chan string, 100) // sessions deleted (answered)
	var pass *httputil.ReverseProxy
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, isKeepalive := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/sessions/"), "/keepalive")
		switch {
		case r.Method == http.MethodPost && isKeepalive:
			rec := httptest.NewRecorder()
			pass.ServeHTTP(rec, r)
			select {
			case refused <- id:
			default:
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"no_leader","message":"refused by the test's proxy"}}`)
			return
		case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/sessions/"):
			pass.ServeHTTP(w, r) // done before the test looks
			deleted <- strings.TrimPrefix(r.URL.Path, "/v1/sessions/")
			return
		}
		pass.ServeHTTP(w, r)
	}))
	dev := startDev(t, "--http-advertise", proxy.Listener.Addr().String())
	pass = httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: dev})
	proxy.Start()
	defer proxy.Close()

	rec, _ := history.NewRecorder("")
	env := &workload.Env{Rec: rec, Res: resource.New(true), Endpoints: []string{strings.TrimPrefix(proxy.URL, "http://")},
		TTL: 3 * time.Second, Wait: time.Second, Hold: 20 * time.Millisecond, Seed: 1}
	w, _ := workload.New("mutex")
	cs, err := workload.NewClients(env, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go cs.Run(ctx)
	id := <-refused
	select {
	case got := <-deleted:
		if got != id {
			t.Fatal("deleted another session than the one whose keepalives were refused first") // keys are secrets: not printed
		}
	case <-ctx.Done():
		t.Fatalf("the worker never deleted the session its client gave up on (lost events: %d)",
			count(rec.Events(), history.Lost, history.Info))
	}
	resp, err := http.Get("http://" + dev + "/v1/sessions/" + id)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the session after the worker's close: HTTP %d, want 404", resp.StatusCode)
	}
}

// electionRun runs the election workload with hold TTLs against lockd
// --dev started with flags: leaders now and then overstay their hold
// and proclaim past it, as deposed leaders that do not know it. It
// returns the election checker's result, every checker's, and the
// history.
func electionRun(t *testing.T, flags ...string) (*checker.Result, []checker.Result, []history.Event) {
	t.Helper()
	addr := startDev(t, flags...)
	results, events := runWorkloadEnv(t, addr, "election", 12*time.Second, func(env *workload.Env) {
		env.HoldTTL = 300 * time.Millisecond
	})
	for i, r := range results {
		if r.Checker == "election" {
			return &results[i], results, events
		}
	}
	t.Fatal("no election checker in an election run")
	return nil, nil, nil
}

// Leaders proclaim and observers follow them; a leader deposed by its
// hold TTL is refused when it proclaims, and every checker finds the
// history valid (TestUnsafeStaleProclaimIsCaught: the election checker
// flags a lockd that lets it proclaim).
func TestElectionWithDeposedLeaders(t *testing.T) {
	election, results, events := electionRun(t)
	for _, r := range results {
		if !r.OK() {
			t.Errorf("%s: %s %v", r.Checker, r.Verdict, r.Anomalies)
		}
	}
	if count(events, history.Proclaim, history.OK) == 0 || election.Counts["sightings"] == 0 {
		t.Errorf("no proclaim acknowledged or no leader seen: %v", election.Counts)
	}
	if count(events, history.Proclaim, history.Fail) == 0 {
		t.Error("no deposed leader's proclaim was refused")
	}
}
