package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// localCluster is a cluster of lockd processes on loopback.
type localCluster struct {
	dir   string
	procs []*exec.Cmd
	addrs []string // HTTP
}

// startCluster starts n lockd processes with --bootstrap-expect n.
func startCluster(bin string, n int) (*localCluster, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("lockd binary: %w (build it with `make build`)", err)
	}
	dir, err := os.MkdirTemp("", "lockbench-")
	if err != nil {
		return nil, err
	}
	c := &localCluster{dir: dir}
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	var gossip []string
	for i := 0; i < n; i++ {
		gossip = append(gossip, fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]))
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i+1)
		http := fmt.Sprintf("127.0.0.1:%d", ports[3*i])
		args := []string{
			"--node-id", id, "--data-dir", filepath.Join(dir, id),
			"--http-addr", http, "--raft-addr", fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]),
			"--gossip-addr", gossip[i], "--bootstrap-expect", fmt.Sprint(n),
			"--join", strings.Join(gossip, ","),
		}
		cmd := exec.Command(bin, args...)
		log, err := os.Create(filepath.Join(dir, id+".log"))
		if err != nil {
			c.stop()
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			c.stop()
			return nil, fmt.Errorf("start %s: %w", id, err)
		}
		c.procs = append(c.procs, cmd)
		c.addrs = append(c.addrs, http)
	}
	return c, nil
}

// stop terminates every process and removes the data.
func (c *localCluster) stop() {
	for _, p := range c.procs {
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
