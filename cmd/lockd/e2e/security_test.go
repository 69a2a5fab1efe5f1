//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/raftnode/certs"
)

// pki writes a CA, node certificates and a gossip key into a directory.
type pki struct {
	t   *testing.T
	dir string
	ca  *certs.Authority
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := certs.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{t: t, dir: t.TempDir(), ca: ca}
	if err := ca.WriteFiles(p.dir); err != nil {
		t.Fatal(err)
	}
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	if err := os.WriteFile(p.file("gossip.key"), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pki) file(name string) string { return filepath.Join(p.dir, name) }

// nodeArgs issues a node certificate for id and returns the flags that
// make a node use it, with the gossip key.
func (p *pki) nodeArgs(id string) []string {
	cert, key, err := p.ca.Node(id, nil, nil)
	if err == nil {
		err = certs.WriteKeyPair(p.dir, id, cert, key)
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return []string{"--tls-ca", p.file("ca.pem"), "--tls-cert", p.file(id + ".pem"), "--tls-key", p.file(id + "-key.pem"),
		"--gossip-key", p.file("gossip.key")}
}

// A cluster started with TLS and a gossip key elects a leader over HTTPS;
// a node without the key, or with the key but a certificate of another
// CA, never becomes a voter; plain HTTP to the HTTPS port gets nowhere;
// the members keep answering with equal digests.
func TestSecureClusterKeepsStrangersOut(t *testing.T) {
	t.Parallel() // mostly waits (see main_test.go)
	p := newPKI(t)
	tlsConf, err := certs.ClientConfig(p.file("ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := startClusterWith(t, 3, newTLSClient(tlsConf), p.nodeArgs)
	members := append([]*node(nil), c.nodes...)
	leader := c.waitLeader(members, 30*time.Second)

	// Every pki writes the same gossip key: evil2 has the key, and a node
	// certificate of a CA the cluster does not trust.
	c.addRogue("evil1", nil)
	c.addRogue("evil2", newPKI(t).nodeArgs("evil2"))

	ctx := context.Background()
	s, err := c.api.createSession(ctx, leader.httpAddr, "10s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.api.acquire(ctx, c.others(leader)[0].httpAddr, s, "", "secure/x", "0s"); err != nil {
		t.Fatalf("acquire through a follower over TLS: %v", err)
	}
	time.Sleep(8 * time.Second) // several reconciliations
	st, err := c.api.status(ctx, leader.httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, m := range st.Members {
		seen = seen || m.ID == "evil2"
		if strings.HasPrefix(m.ID, "evil") && m.Voter {
			t.Errorf("rogue %s became a voter: %+v", m.ID, st.Members)
		}
		if m.ID == "evil1" {
			t.Errorf("evil1 (no gossip key) is in the gossip pool: %+v", st.Members)
		}
	}
	if !seen {
		// It has the gossip key: only its certificate keeps it from voting.
		t.Errorf("evil2 never joined the gossip pool, so the test shows nothing of the voter rule: %+v", st.Members)
	}
	c.waitConverged(members, 20*time.Second)
	if _, err := newClient().status(ctx, leader.httpAddr); err == nil {
		t.Fatal("plain HTTP to the HTTPS port answered")
	}
}

// addRogue starts a node that tries to join the cluster's gossip.
func (c *cluster) addRogue(id string, args []string) {
	c.t.Helper()
	dir := c.t.TempDir()
	var gossip []string
	for _, nd := range c.nodes {
		gossip = append(gossip, nd.gossip)
	}
	ports := lockdtest.FreePorts(c.t, 3)
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	nd := &node{id: id, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, id+".log"),
		httpAddr: addr(0), raftAddr: addr(1), gossip: addr(2)}
	nd.args = append([]string{"--node-id", id, "--data-dir", nd.dataDir, "--http-addr", nd.httpAddr,
		"--raft-addr", nd.raftAddr, "--gossip-addr", nd.gossip, "--join", strings.Join(gossip, ","),
		"--raft-timing", raftTiming(), "--log-level", logLevel()}, args...)
	c.nodes = append(c.nodes, nd) // killed at cleanup
	c.start(nd)
}

// A node refuses to listen beyond loopback without TLS and a gossip key
// unless --insecure says so.
func TestNonLoopbackWithoutTLSExits(t *testing.T) {
	needBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, lockdBin, "--node-id", "n1", "--data-dir", t.TempDir(),
		"--http-addr", "0.0.0.0:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--insecure") {
		t.Fatalf("lockd on 0.0.0.0 without TLS: err %v, output %q; want an exit naming --insecure", err, out)
	}
}

// SIGHUP reloads the node's certificate: new connections see the new one.
func TestSIGHUPReloadsCertificates(t *testing.T) {
	p := newPKI(t)
	tlsConf, err := certs.ClientConfig(p.file("ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := startClusterWith(t, 1, newTLSClient(tlsConf), p.nodeArgs)
	n1 := c.waitLeader(c.nodes, 30*time.Second)
	serial := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", n1.httpAddr, tlsConf)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	for _, f := range []string{p.file("n1.pem"), p.file("n1-key.pem")} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	p.nodeArgs("n1") // a new certificate for n1 in the same files
	n1.mu.Lock()
	err = n1.cmd.Process.Signal(syscall.SIGHUP)
	n1.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a new certificate after SIGHUP", func() (bool, string) {
		s := serial()
		return s != before, "serial still " + s
	})
	if _, err := c.api.status(context.Background(), n1.httpAddr); err != nil {
		t.Fatalf("status after the reload: %v", err)
	}
}
