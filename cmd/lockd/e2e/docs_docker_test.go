//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockd/lockd/raftnode/certs"
)

// composeProject is the compose file's project (COMPOSE_PROJECT_NAME in
// .env), the one docker blocks use.
const composeProject = "lockd"

// dockerBlock runs a docker block in bash from the repository's root,
// bounded to 5 minutes (a first `make docker` builds lockd from scratch).
func (d *docPage) dockerBlock(where string, b docBlock) {
	d.t.Helper()
	if d.dockerEnv == nil {
		d.dockerSetup()
	}
	if n := b.opts["up"]; n != "" {
		d.composeUp(where, n)
	}
	d.runFor(where, exec.Command("bash", "-c", "set -eo pipefail\n"+b.text), d.root, d.dockerEnv, 5*time.Minute)
	if ids := b.opts["exits"]; ids != "" && !d.t.Failed() {
		d.composeExited(where, strings.Split(ids, ","))
	}
}

// dockerSetup checks that project lockd is unused, registers the
// cleanup that takes it down, and makes the docker blocks' environment.
func (d *docPage) dockerSetup() {
	t := d.t
	t.Helper()
	if _, err := exec.LookPath("docker-compose"); err != nil {
		t.Fatalf("LOCKD_DOC_DOCKER=1 but no docker-compose: %v", err)
	}
	// The environment: the test's without what would move the compose
	// file off its defaults (LOCKD_*, COMPOSE_*), HOME a directory of
	// the test's, and Go's and Docker's own directories kept where the
	// user's HOME puts them.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOCKD_") && !strings.HasPrefix(kv, "COMPOSE_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	vals := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"} {
		if i < len(vals) && os.Getenv(k) == "" {
			env = append(env, k+"="+vals[i])
		}
	}
	if home, err := os.UserHomeDir(); err == nil && os.Getenv("DOCKER_CONFIG") == "" {
		env = append(env, "DOCKER_CONFIG="+filepath.Join(home, ".docker"))
	}
	env = append(env, "HOME="+t.TempDir())

	compose := func(limit time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		cmd := exec.CommandContext(ctx, "docker-compose", args...)
		cmd.Dir, cmd.Env = d.root, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// The cleanup deletes project lockd's containers and volumes: refuse
	// to start on a cluster somebody else runs.
	out2, err := compose(time.Minute, "--profile", "five", "ps", "-q")
	if err != nil {
		t.Fatalf("docker-compose ps: %v\n%s", err, out2)
	}
	vols, err := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=com.docker.compose.project="+composeProject).Output()
	if err != nil {
		t.Fatalf("docker volume ls: %v", err)
	}
	if strings.TrimSpace(out2) != "" || strings.TrimSpace(string(vols)) != "" {
		t.Fatalf("compose project %s already has containers or volumes, which this test would delete:\n%s%s"+
			"take them down first (docker-compose --profile five down -v, from the repository's root)",
			composeProject, out2, vols)
	}
	certsDir := filepath.Join(d.root, "certs")
	_, statErr := os.Stat(certsDir)
	madeCerts := os.IsNotExist(statErr)
	t.Cleanup(func() {
		out, err := compose(3*time.Minute, "--profile", "five", "down", "-v", "--timeout", "10")
		if err != nil {
			t.Errorf("cleanup: docker-compose --profile five down -v: %v\n%s", err, out)
		}
		if madeCerts {
			if err := os.RemoveAll(certsDir); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	d.dockerEnv = env
}

// composeExited waits until the compose services ids (n1..n5) have
// exited 0 and n1 (n2 if n1 is one of them) no longer lists them as
// voters.
func (d *docPage) composeExited(where string, ids []string) {
	t := d.t
	t.Helper()
	for _, id := range ids {
		eventually(t, 90*time.Second, fmt.Sprintf("%s: %s's container exited 0", where, id), func() (bool, string) {
			cmd := exec.Command("docker-compose", "ps", "-q", id)
			cmd.Dir, cmd.Env = d.root, d.dockerEnv
			out, err := cmd.Output()
			if err != nil || strings.TrimSpace(string(out)) == "" {
				return false, fmt.Sprintf("docker-compose ps -q %s: %v %s", id, err, out)
			}
			st, err := exec.Command("docker", "inspect", "-f", "{{.State.Running}} {{.State.ExitCode}}", strings.TrimSpace(string(out))).Output()
			if err != nil {
				return false, err.Error()
			}
			if s := strings.TrimSpace(string(st)); s != "false 0" {
				return false, "running, exit code: " + s
			}
			return true, ""
		})
	}
	addr := "127.0.0.1:7001"
	for _, id := range ids {
		if id == "n1" {
			addr = "127.0.0.1:7002"
		}
	}
	conf, err := certs.ClientConfig(filepath.Join(d.root, "certs", "ca.pem"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := newTLSClient(conf)
	defer c.tr.CloseIdleConnections()
	eventually(t, 60*time.Second, fmt.Sprintf("%s: %v no longer voters", where, ids), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := c.status(ctx, addr)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			for _, id := range ids {
				if m.ID == id && m.Voter {
					return false, fmt.Sprintf("%+v", st.Members)
				}
			}
		}
		return true, ""
	})
}

// composeUp starts n (3 or 5) nodes of the compose cluster and waits
// until each of them knows the leader.
func (d *docPage) composeUp(where, n string) {
	t := d.t
	t.Helper()
	k, err := strconv.Atoi(n)
	if err != nil || (k != 3 && k != 5) {
		t.Fatalf("%s: up=%s: want up=3 or up=5", where, n)
	}
	args := []string{"up", "-d"}
	if k == 5 {
		args = append([]string{"--profile", "five"}, args...)
	}
	d.run(where+" docker-compose "+strings.Join(args, " "), exec.Command("docker-compose", args...), d.root, d.dockerEnv)
	if t.Failed() {
		t.FailNow()
	}
	eventually(t, 90*time.Second, fmt.Sprintf("%s: %d compose nodes know the leader", where, k), func() (bool, string) {
		conf, err := certs.ClientConfig(filepath.Join(d.root, "certs", "ca.pem"), "", "")
		if err != nil {
			return false, err.Error()
		}
		c := newTLSClient(conf)
		defer c.tr.CloseIdleConnections()
		for i := 1; i <= k; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := c.status(ctx, fmt.Sprintf("127.0.0.1:700%d", i))
			cancel()
			if err != nil {
				return false, err.Error()
			}
			if st.Leader.ID == "" || len(st.Members) < k {
				return false, fmt.Sprintf("n%d: leader %q, %d members", i, st.Leader.ID, len(st.Members))
			}
		}
		return true, ""
	})
}
