package main

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/raftnode/certs"
)

// localCluster is a cluster of lockd processes on loopback.
type localCluster struct {
	dir   string
	bin   string
	procs []*exec.Cmd
	args  [][]string  // each node's command line
	addrs []string    // HTTP
	tls   *tls.Config // the clients' TLS config; nil: plain HTTP
}

// startCluster starts n lockd processes with --bootstrap-expect n, with
// TLS and a gossip key if withTLS.
// extra flags go to every node.
func startCluster(bin string, n int, withTLS bool, extra []string) (*localCluster, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("lockd binary: %w (build it with `make build`)", err)
	}
	dir, err := os.MkdirTemp("", "lockbench-")
	if err != nil {
		return nil, err
	}
	c := &localCluster{dir: dir, bin: bin}
	ports, err := freePorts(3 * n)
	if err != nil {
		c.stop()
		return nil, err
	}
	tlsArgs := make([][]string, n)
	if withTLS {
		if tlsArgs, c.tls, err = makeTLS(dir, n); err != nil {
			c.stop()
			return nil, err
		}
	}
	var gossip []string
	for i := 0; i < n; i++ {
		gossip = append(gossip, fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]))
	}
	for i := 0; i < n; i++ {
		id := nodeID(i)
		http := fmt.Sprintf("127.0.0.1:%d", ports[3*i])
		args := append([]string{
			"--node-id", id, "--data-dir", filepath.Join(dir, id),
			"--http-addr", http, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]),
			"--gossip-addr", gossip[i], "--bootstrap-expect", fmt.Sprint(n),
			"--join", strings.Join(gossip, ","),
		}, tlsArgs[i]...)
		args = append(args, extra...)
		if err := c.start(id, args); err != nil {
			c.stop()
			return nil, err
		}
		c.addrs = append(c.addrs, http)
	}
	return c, nil
}

// nodeID is the id of the i-th node (from 0): n1, n2, ...
func nodeID(i int) string { return fmt.Sprintf("n%d", i+1) }

// start starts lockd node id with args, logging to dir/id.log.
func (c *localCluster) start(id string, args []string) error {
	cmd, err := c.exec(id, args)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, cmd)
	c.args = append(c.args, args)
	return nil
}

// exec starts one lockd process, appending to its log.
func (c *localCluster) exec(id string, args []string) (*exec.Cmd, error) {
	cmd := exec.Command(c.bin, args...)
	log, err := os.OpenFile(filepath.Join(c.dir, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	return cmd, nil
}

// restart stops node i (SIGTERM, as an operator would), starts it again
// on its data dir, and returns how long it took from the start until
// caughtUp reports that it caught up.
func (c *localCluster) restart(i int, caughtUp func() bool) (time.Duration, error) {
	_ = c.procs[i].Process.Signal(syscall.SIGTERM)
	_ = c.procs[i].Wait()
	start := time.Now()
	cmd, err := c.exec(nodeID(i), c.args[i])
	if err != nil {
		return 0, err
	}
	c.procs[i] = cmd
	for !caughtUp() {
		if time.Since(start) > 5*time.Minute {
			return 0, fmt.Errorf("%s did not catch up within 5 minutes after its restart", nodeID(i))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start), nil
}

// snapshotAt waits up to a few minutes for node i to hold a raft
// snapshot at index or later (the snapshot directories are named
// term-index-milliseconds).
func (c *localCluster) snapshotAt(i int, index uint64) error {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(filepath.Join(c.dir, nodeID(i), "snapshots"))
		for _, e := range entries {
			parts := strings.Split(e.Name(), "-")
			if len(parts) == 3 && !strings.HasSuffix(e.Name(), ".tmp") {
				if at, err := strconv.ParseUint(parts[1], 10, 64); err == nil && at >= index {
					return nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s took no snapshot at index %d or later in 3 minutes (spawn with --lockd-flags \"--snapshot-threshold 1024 --snapshot-interval 5s\")", nodeID(i), index)
}

// makeTLS writes to dir a new CA (ca.pem), a node certificate for each of
// the n nodes (n1.pem and n1-key.pem, ...) and a gossip key (gossip.key).
// It returns each node's TLS flags and the clients' TLS config, which
// trusts the CA.
func makeTLS(dir string, n int) ([][]string, *tls.Config, error) {
	ca, err := certs.NewAuthority()
	if err != nil {
		return nil, nil, err
	}
	if err := ca.WriteFiles(dir); err != nil {
		return nil, nil, err
	}
	gossipKey := filepath.Join(dir, "gossip.key")
	if err := writeGossipKey(gossipKey); err != nil {
		return nil, nil, err
	}
	caFile := filepath.Join(dir, "ca.pem")
	args := make([][]string, n)
	for i := range args {
		id := nodeID(i)
		certPEM, keyPEM, err := ca.Node(id, nil, nil) // 127.0.0.1 is always in
		if err == nil {
			err = certs.WriteKeyPair(dir, id, certPEM, keyPEM)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s certificate: %w", id, err)
		}
		args[i] = []string{"--tls-ca", caFile, "--tls-cert", filepath.Join(dir, id+".pem"),
			"--tls-key", filepath.Join(dir, id+"-key.pem"), "--gossip-key", gossipKey}
	}
	cfg, err := client.TLSConfig(caFile, "", "")
	return args, cfg, err
}

// writeGossipKey writes a new gossip key to path as lockd keygen prints
// it: 32 random bytes (AES-256) in base64.
func writeGossipKey(path string) error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600)
}

// stop terminates every process and removes the data.
func (c *localCluster) stop() {
	for _, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGCONT) // a paused node takes its SIGTERM only once running
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() {
		for _, p := range c.procs {
			_ = p.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		for _, p := range c.procs {
			_ = p.Process.Kill()
		}
		<-done
	}
	os.RemoveAll(c.dir)
}

// freePorts returns n distinct free TCP ports on loopback.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// kill kills (SIGKILL: no goodbye to its peers) the node whose HTTP
// address is addr and waits for it to exit. It stays down; stop skips it.
func (c *localCluster) kill(addr string) error {
	i := slices.Index(c.addrs, addr)
	if i < 0 {
		return fmt.Errorf("%s is none of the nodes lockbench started", addr)
	}
	if err := c.procs[i].Process.Kill(); err != nil {
		return fmt.Errorf("kill %s: %w", nodeID(i), err)
	}
	_ = c.procs[i].Wait() // "signal: killed"
	return nil
}

// pause stops (SIGSTOP) the node whose HTTP address is addr, as a long GC
// pause or a frozen VM would; resume (SIGCONT) wakes it, believing it
// still leads.
func (c *localCluster) pause(addr string) error { return c.signal(addr, syscall.SIGSTOP) }

// resume continues a paused node.
func (c *localCluster) resume(addr string) error { return c.signal(addr, syscall.SIGCONT) }

func (c *localCluster) signal(addr string, sig syscall.Signal) error {
	i := slices.Index(c.addrs, addr)
	if i < 0 {
		return fmt.Errorf("%s is none of the nodes lockbench started", addr)
	}
	if err := c.procs[i].Process.Signal(sig); err != nil {
		return fmt.Errorf("%v %s: %w", sig, nodeID(i), err)
	}
	return nil
}
