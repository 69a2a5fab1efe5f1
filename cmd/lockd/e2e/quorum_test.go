//go:build linux

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quorumNamedWithin is how soon after two of three nodes stop answering
// the third must say that its quorum is lost (issue 38): its raft
// requests to them go unanswered for about an election timeout, which a
// follower sends once it stands for election, a heartbeat timeout or two
// after its leader went quiet.
const quorumNamedWithin = 6 * time.Second

// TestQuorumLossNamedAtOnce: two of three nodes freeze (SIGSTOP: their
// ports still accept connections, nothing answers, and gossip goes on
// seeing them for a while). Within quorumNamedWithin the third answers a
// write 503 no_leader with quorum_lost (no write hangs past that),
// GET /v1/status says quorum_lost with itself alone reachable, and
// lockctl status exits 69 naming 1 of 3 voters. Which nodes freeze is
// chosen once every node names one leader, so that the survivor is the
// leader in one case and a follower in the other; once they thaw, the
// survivor's quorum is back.
func TestQuorumLossNamedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		survivor func(c *cluster, leader *node) *node
	}{
		{"the two followers frozen", func(_ *cluster, leader *node) *node { return leader }},
		{"the leader and a follower frozen", func(c *cluster, leader *node) *node { return c.others(leader)[0] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 3)
			must(t, "create session", func(ctx context.Context) (string, error) {
				return c.api.createSession(ctx, c.waitLeader(c.nodes, 30*time.Second).httpAddr, "30s")
			})
			leader := c.waitLeader(c.nodes, 30*time.Second) // named by every node, just now
			survivor := tc.survivor(c, leader)
			frozen := c.others(survivor)
			frozenAt := freeze(t, frozen...)
			t.Logf("froze %v; %s survives (it was %s)", ids(frozen), survivor.id, roleOf(survivor, leader))
			deadline := frozenAt.Add(quorumNamedWithin)

			writeQuorumLost(t, c, survivor, frozenAt, deadline)
			statusQuorumLost(t, c, survivor, frozenAt, deadline)
			want := fmt.Sprintf("Quorum:         lost (1 of 3 voters reachable: %s; a majority of 2 is needed)", survivor.id)
			code, out, stderr, took := runLockctl(t, "status", "--addr", survivor.httpAddr)
			t.Logf("lockctl status after %v: exit %d", time.Since(frozenAt).Round(time.Millisecond), code)
			if code != 69 || !strings.Contains(out, want) {
				t.Errorf("lockctl status without quorum: exit %d after %v, want 69 and %q:\n%s%s", code, took, want, out, stderr)
			}
			if time.Now().After(deadline) {
				t.Errorf("lockctl status answered %v after the freeze, over %v", time.Since(frozenAt), quorumNamedWithin)
			}

			thaw(t, frozen...)
			c.waitLeader(c.nodes, 30*time.Second)
			eventually(t, 30*time.Second, survivor.id+" to see its quorum back", func() (bool, string) {
				st, err := c.api.status(t.Context(), survivor.httpAddr)
				if err != nil {
					return false, err.Error()
				}
				return !st.QuorumLost && len(st.Quorum.Reachable) == 3, fmt.Sprintf("%+v", st.Quorum)
			})
		})
	}
}

// freeze SIGSTOPs the nodes' processes and returns when the last of them
// has stopped (a signal is delivered later than kill returns: on a loaded
// machine a node may still answer a write sent just after it); they are
// thawed (SIGCONT) when the test ends, whatever happens, before they are
// killed.
func freeze(t *testing.T, nodes ...*node) time.Time {
	t.Helper()
	for _, nd := range nodes {
		nd.mu.Lock()
		proc := nd.cmd.Process
		nd.mu.Unlock()
		t.Cleanup(func() { _ = proc.Signal(syscall.SIGCONT) })
		if err := proc.Signal(syscall.SIGSTOP); err != nil {
			t.Fatalf("freeze %s: %v", nd.id, err)
		}
		eventually(t, 10*time.Second, nd.id+" stopped", func() (bool, string) {
			state := procState(proc.Pid)
			return state == "T" || state == "t", "state " + state
		})
	}
	return time.Now()
}

// procState is a process's state letter in /proc/PID/stat (T: stopped).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return err.Error()
	}
	// The state follows the command name, which is in parentheses and
	// may hold spaces: it is the first field after the last ')'.
	if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// thaw SIGCONTs frozen nodes.
func thaw(t *testing.T, nodes ...*node) {
	t.Helper()
	for _, nd := range nodes {
		nd.mu.Lock()
		proc := nd.cmd.Process
		nd.mu.Unlock()
		if err := proc.Signal(syscall.SIGCONT); err != nil {
			t.Fatalf("thaw %s: %v", nd.id, err)
		}
	}
}

func roleOf(nd, leader *node) string {
	if nd == leader {
		return "the leader"
	}
	return "a follower"
}

// writeQuorumLost sends writes (session creates, each sent once) to nd,
// the first at once, until one is answered 503 no_leader with
// quorum_lost; it fails the test when none is by deadline, or when one
// succeeds (nothing can commit without a majority).
func writeQuorumLost(t *testing.T, c *cluster, nd *node, frozenAt, deadline time.Time) {
	t.Helper()
	once := c.api.sendOnce()
	var answers []string
	for {
		ctx, cancel := context.WithDeadline(t.Context(), deadline.Add(time.Second))
		sent := time.Now()
		_, err := once.createSession(ctx, nd.httpAddr, "30s")
		cancel()
		at := time.Since(frozenAt).Round(time.Millisecond)
		answers = append(answers, fmt.Sprintf("sent at %v, answered at %v: %v", sent.Sub(frozenAt).Round(time.Millisecond), at, err))
		var ae *apiError
		switch {
		case err == nil:
			t.Fatalf("a write committed on %s with two of three nodes frozen:\n%s", nd.id, strings.Join(answers, "\n"))
		case errors.As(err, &ae) && ae.Status == 503 && ae.Code == "no_leader" && ae.QuorumLost:
			t.Logf("writes on %s:\n%s", nd.id, strings.Join(answers, "\n"))
			if !strings.Contains(ae.Message, "1 of 3 voters reachable ("+nd.id+")") {
				t.Errorf("the quorum-lost answer does not name the voters: %q", ae.Message)
			}
			if time.Now().After(deadline) {
				t.Fatalf("quorum_lost came %v after the freeze, over %v", at, quorumNamedWithin)
			}
			return
		case time.Now().After(deadline):
			t.Fatalf("no write on %s answered quorum_lost within %v of the freeze:\n%s", nd.id, quorumNamedWithin,
				strings.Join(answers, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// statusQuorumLost checks that nd's GET /v1/status says its quorum is
// lost, with itself alone reachable of 3 voters, by deadline.
func statusQuorumLost(t *testing.T, c *cluster, nd *node, frozenAt, deadline time.Time) {
	t.Helper()
	ctx, cancel := context.WithDeadline(t.Context(), deadline.Add(time.Second))
	defer cancel()
	st, err := c.api.sendOnce().status(ctx, nd.httpAddr)
	if err != nil {
		t.Fatalf("status of %s: %v", nd.id, err)
	}
	q := st.Quorum
	if !st.QuorumLost || q.Voters != 3 || q.Needed != 2 || !slices.Equal(q.Reachable, []string{nd.id}) {
		t.Errorf("status of %s %v after the freeze: quorum_lost %v, quorum %+v; want lost, %s alone of 3 reachable, 2 needed",
			nd.id, time.Since(frozenAt).Round(time.Millisecond), st.QuorumLost, q, nd.id)
	}
	if time.Now().After(deadline) {
		t.Errorf("status answered %v after the freeze, over %v", time.Since(frozenAt), quorumNamedWithin)
	}
}
