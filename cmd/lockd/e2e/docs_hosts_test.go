//go:build linux

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/raftnode/certs"
)

// The hosts blocks of docs/operations.md: machines 10.0.0.K, run here as
// processes on 127.0.0.1, each address:port of the page on a free port.

var hostRE = regexp.MustCompile(`10\.0\.0\.\d+(:\d+)?`)

// hostText rewrites the page's 10.0.0.K addresses to loopback ones.
func (d *docPage) hostText(text string) string {
	return hostRE.ReplaceAllStringFunc(text, func(a string) string {
		if !strings.Contains(a, ":") {
			return "127.0.0.1" // an address a certificate names
		}
		if d.hostAddrs[a] == "" {
			d.hostAddrs[a] = fmt.Sprintf("127.0.0.1:%d", lockdtest.FreePorts(d.t, 1)[0])
		}
		return d.hostAddrs[a]
	})
}

// swapNode is the text of n1's command for node id ("nK"): n1 and
// 10.0.0.1 swapped with nK and 10.0.0.K.
func swapNode(text, id string) string {
	if id == "" || id == "n1" {
		return text
	}
	k := strings.TrimPrefix(id, "n")
	return strings.NewReplacer("n1", id, id, "n1", "10.0.0.1", "10.0.0."+k, "10.0.0."+k, "10.0.0.1").Replace(text)
}

// hostsBlock runs a hosts block: nodes to start, or commands.
func (d *docPage) hostsBlock(where string, b docBlock) {
	done := d.expectExits(where, d.hosts, b)
	if strings.HasPrefix(strings.TrimSpace(b.text), "lockd --node-id") {
		var started []*node
		for _, id := range strings.Split(b.opts["each"], ",") {
			started = append(started, d.startHosts(where, swapNode(b.text, id))...)
		}
		for _, nd := range started {
			d.waitHost(where, nd)
		}
	} else {
		if d.hostEnv == nil {
			d.hostEnv = &docEnv{}
		}
		d.shell(where, d.hostText(b.text), d.hostEnv, true)
	}
	done()
}

// startHosts starts the `lockd --node-id ...` commands of text.
func (d *docPage) startHosts(where, text string) []*node {
	if d.hosts == nil {
		conf, err := certs.ClientConfig(filepath.Join(d.work, "pki", "ca.pem"), "", "")
		if err != nil {
			d.t.Fatalf("%s: %v", where, err)
		}
		d.hosts = &cluster{t: d.t, api: newTLSClient(conf)}
		d.t.Cleanup(d.hosts.cleanup)
	}
	var started []*node
	for _, line := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
		line, _, _ = strings.Cut(line, "#")
		words := strings.Fields(d.hostText(line))
		if len(words) == 0 {
			continue
		}
		if words[0] != "lockd" {
			d.t.Fatalf("%s: %q in a block of lockd nodes", where, line)
		}
		nd := &node{dir: d.work, args: append(words[1:], "--raft-timing", raftTiming(), "--log-level", logLevel())}
		flag := func(name string) *string {
			if i := slices.Index(nd.args, name); i >= 0 && i+1 < len(nd.args) {
				return &nd.args[i+1]
			}
			return new(string)
		}
		nd.id, nd.httpAddr, nd.raftAddr, nd.gossip = *flag("--node-id"), *flag("--http-addr"), *flag("--raft-addr"), *flag("--gossip-addr")
		nd.dataDir = filepath.Join(d.work, "data", nd.id)
		*flag("--data-dir") = nd.dataDir
		nd.logPath = filepath.Join(d.work, nd.id+".log")
		d.hosts.nodes = append(d.hosts.nodes, nd)
		d.hosts.start(nd)
		started = append(started, nd)
	}
	return started
}

// waitHost waits until nd is a voter that knows a leader.
func (d *docPage) waitHost(where string, nd *node) {
	eventually(d.t, 90*time.Second, where+": "+nd.id+" a voter with a leader", func() (bool, string) {
		select {
		case <-nd.exited:
			d.t.Fatalf("%s: %s exited:\n%s", where, nd.id, lockdtest.Tail(nd.logPath, 30))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := d.hosts.api.status(ctx, nd.httpAddr)
		if err != nil {
			return false, err.Error()
		}
		voter := slices.ContainsFunc(st.Members, func(m memberView) bool { return m.ID == nd.id && m.Voter })
		return st.Leader.ID != "" && voter, fmt.Sprintf("leader %q, members %+v", st.Leader.ID, st.Members)
	})
}
