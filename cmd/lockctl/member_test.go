//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
)

// TestMemberRemoveAndLeave drives member list, remove and leave against
// three lockd processes: removing a live node is refused (exit 65, naming
// `lockd leave`) and it stays a voter; killed, it is removed once the
// cluster sees it dead (--wait); a healthy node leaves and exits; an
// unknown id cannot leave (exit 1).
func TestMemberRemoveAndLeave(t *testing.T) {
	nodes := startLockdCluster(t, 3)
	waitMembers(t, nodes[0].http, 3)
	code, out, stderr := lockctl(t, nodes[0].http, "member", "list")
	if code != exitOK || strings.Count(out, "true") != 3 || !strings.Contains(out, "VOTER") {
		t.Fatalf("member list: exit %d\n%s%s", code, out, stderr)
	}
	victim, via := refusedRemoval(t, nodes)
	if !slices.Contains(voters(via.http), victim.id) {
		t.Fatalf("%s is no voter after a refused removal", victim.id)
	}

	victim.kill(t)
	code, out, stderr = lockctl(t, via.http, "member", "remove", "--wait", "30s", victim.id)
	if code != exitOK || !strings.Contains(out, "removed "+victim.id) {
		t.Fatalf("member remove --wait of killed %s: exit %d\n%s%s", victim.id, code, out, stderr)
	}
	if slices.Contains(voters(via.http), victim.id) {
		t.Fatalf("%s still a voter after its removal", victim.id)
	}

	code, _, stderr = lockctl(t, via.http, "member", "leave", "n9")
	if code != exitFalse || !strings.Contains(stderr, "no such member") {
		t.Fatalf("member leave n9: exit %d, stderr %q; want %d", code, stderr, exitFalse)
	}
	code, out, stderr = lockctl(t, nodes[0].http+","+via.http, "member", "leave", via.id)
	if code != exitOK || !strings.Contains(out, via.id+" is leaving") {
		t.Fatalf("member leave %s: exit %d\n%s%s", via.id, code, out, stderr)
	}
	via.waitExit(t, 30*time.Second)
	rest := slices.DeleteFunc(slices.Clone(nodes), func(nd *lockdProc) bool { return nd == victim || nd == via })
	waitFor(t, 10*time.Second, "one voter left", func() bool {
		return slices.Equal(voters(rest[0].http), []string{rest[0].id})
	})
}

// refusedRemoval runs member remove, through a node that does not lead,
// of another node that does not lead, and wants it refused as alive:
// exit 65, member_alive, naming `lockd leave`. It returns the two nodes.
// Should the member lead by the time the leader answers (it refuses to
// remove itself), the nodes are picked again.
func refusedRemoval(t *testing.T, nodes []*lockdProc) (victim, via *lockdProc) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		leader := waitMembers(t, nodes[0].http, 3)
		var rest []*lockdProc
		for _, nd := range nodes {
			if nd.id != leader {
				rest = append(rest, nd)
			}
		}
		victim, via = rest[0], rest[1]
		code, _, stderr := lockctl(t, via.http, "member", "remove", victim.id)
		if strings.Contains(stderr, victim.id+" is the leader") && attempt < 5 {
			continue
		}
		if code != exitDataErr || !strings.Contains(stderr, "member_alive") ||
			!strings.Contains(stderr, "`lockd leave` on "+victim.id) {
			t.Fatalf("member remove of live %s: exit %d, stderr %q; want %d, member_alive naming `lockd leave`",
				victim.id, code, stderr, exitDataErr)
		}
		return victim, via
	}
}

// lockdProc is one lockd process of a test cluster.
type lockdProc struct {
	id, http, log string
	cmd           *exec.Cmd
	exited        chan struct{}
}

// startLockdCluster starts n1..nN on claimed loopback ports, each joining
// the others with --bootstrap-expect n; they are killed in t.Cleanup.
func startLockdCluster(t *testing.T, n int) []*lockdProc {
	t.Helper()
	needBinaries(t)
	dir := t.TempDir()
	ports := lockdtest.FreePorts(t, 3*n)
	var gossip []string
	for i := range n {
		gossip = append(gossip, fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]))
	}
	var nodes []*lockdProc
	for i := range n {
		nd := &lockdProc{id: fmt.Sprintf("n%d", i+1), http: fmt.Sprintf("127.0.0.1:%d", ports[3*i]),
			log: filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)), exited: make(chan struct{})}
		args := []string{"--node-id", nd.id, "--data-dir", filepath.Join(dir, nd.id),
			"--http-addr", nd.http, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]),
			"--gossip-addr", gossip[i], "--join", strings.Join(slices.Delete(slices.Clone(gossip), i, i+1), ","),
			"--bootstrap-expect", strconv.Itoa(n), "--raft-timing", "0.5", "--log-level", "info"}
		logf, err := os.Create(nd.log)
		if err != nil {
			t.Fatal(err)
		}
		nd.cmd = exec.Command(lockdBin, args...)
		nd.cmd.Stdout, nd.cmd.Stderr = logf, logf
		err = lockdtest.Start(nd.cmd)
		logf.Close()
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = nd.cmd.Wait(); lockdtest.Exited(nd.cmd); close(nd.exited) }()
		nodes = append(nodes, nd)
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.kill(t)
			if t.Failed() {
				t.Logf("---- last lines of %s ----\n%s", nd.id, lockdtest.Tail(nd.log, 40))
			}
		}
	})
	return nodes
}

// kill SIGKILLs the node and waits until it is gone.
func (nd *lockdProc) kill(t *testing.T) {
	t.Helper()
	_ = nd.cmd.Process.Signal(syscall.SIGKILL)
	nd.waitExit(t, 10*time.Second)
}

// waitExit waits until the node's process has exited.
func (nd *lockdProc) waitExit(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-nd.exited:
	case <-time.After(d):
		t.Fatalf("%s still running after %v", nd.id, d)
	}
}

// clusterStatus is what these tests read of GET /v1/status.
type clusterStatus struct {
	Leader  struct{ ID string }
	Members []struct {
		ID    string
		Voter bool
	}
}

// waitMembers waits until the node at addr names a leader and lists want
// voters, and returns the leader's id.
func waitMembers(t *testing.T, addr string, want int) string {
	t.Helper()
	var st clusterStatus
	waitFor(t, 30*time.Second, fmt.Sprintf("a leader and %d voters", want), func() bool {
		st = clusterStatus{}
		return getJSON(addr, "/v1/status", &st) == nil && st.Leader.ID != "" && len(votersOf(st)) == want
	})
	return st.Leader.ID
}

// voters returns the voters the node at addr lists, sorted; none when it
// does not answer.
func voters(addr string) []string {
	var st clusterStatus
	if err := getJSON(addr, "/v1/status", &st); err != nil {
		return nil
	}
	return votersOf(st)
}

func votersOf(st clusterStatus) []string {
	var ids []string
	for _, m := range st.Members {
		if m.Voter {
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	return ids
}
