//go:build linux

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/cmd/lockd/lockdtest"
	"github.com/lockd/lockd/raftnode/certs"
)

// The command blocks of docs/ run here, as a reader would type them. Every
// fenced block of a tested page must follow a marker line
//
//	<!-- doc-test: KIND [key=value ...] -->
//
// that says how it runs (an HTML comment: invisible on the rendered page):
//
//   - compose: against a cluster started with the compose file's flags
//     (TLS, gossip key, --acl; certificates from `lockd tls init` in
//     ./certs), bootstrapped, with LOCKD_CACERT and LOCKD_TOKEN exported
//     as the README leaves a user; https://127.0.0.1:700K is node K.
//   - fresh: like compose, against a new node nobody has bootstrapped yet.
//   - hosts: the 10.0.0.K deployment of docs/operations.md, on loopback:
//     each 10.0.0.K:PORT is a free port of 127.0.0.1. A block of `lockd
//     --node-id ...` commands starts those nodes (each=n1,n2 runs it once
//     per node, with n1 and 10.0.0.1 swapped for that node's).
//   - In compose and hosts blocks, stop=ID stops a node first (a node that
//     died), exits=ID,... expects the block to make those nodes exit.
//   - docker: needs Docker and docker-compose; run from the repository's
//     root only when LOCKD_DOC_DOCKER=1 (make doc-docker), on the compose
//     file's defaults: project lockd, network 10.77.0.0/24, host ports
//     7001-7005. up=3 (or up=5) first starts that many nodes with
//     docker-compose up -d and waits until each knows the leader (the
//     block takes the cluster as running); exits=ID,... checks after the
//     block that those services' containers exited 0 and are no longer
//     voters. The first docker block refuses to run while project lockd
//     has containers or volumes; the page's cleanup takes the project
//     down with its volumes (also when a block failed) and removes
//     ./certs if the page made it. HOME is a directory of the test's, so
//     that ~ in a block is not the user's.
//   - listing: not commands (a file listing, log lines).
//   - skip reason=...: not run, for the reason given.
//
// A block fails when its shell exits non-zero or its output carries a
// lockd error body. Shell blocks run with `set -e` in one working
// directory per page; what a block exports is seen by the later ones of
// the same kind.

// docBlock is one fenced block of a page.
type docBlock struct {
	line int               // of the fence
	kind string            // of the marker
	opts map[string]string // the marker's key=value words
	text string
}

var markerRE = regexp.MustCompile(`^<!-- doc-test: ([a-z]+)((?: [a-z]+=[^ ]+)*) -->$`)

// docBlocks reads the fenced blocks of a page and their markers.
func docBlocks(path string) ([]docBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []docBlock
	var prev string
	var cur *docBlock
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks, cur = append(blocks, *cur), nil
		case cur != nil:
			cur.text += line + "\n"
		case strings.HasPrefix(line, "```"):
			m := markerRE.FindStringSubmatch(prev)
			if m == nil {
				return nil, fmt.Errorf("%s:%d: a block without a <!-- doc-test: KIND --> line before it", path, n)
			}
			cur = &docBlock{line: n, kind: m[1], opts: map[string]string{}}
			for _, kv := range strings.Fields(m[2]) {
				k, v, _ := strings.Cut(kv, "=")
				cur.opts[k] = v
			}
		}
		prev = line
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: block not closed", path, cur.line)
	}
	return blocks, sc.Err()
}

// TestDocBlocksParse: a block without a marker, or with a marker not on
// the line before its fence, is refused.
func TestDocBlocksParse(t *testing.T) {
	for _, tc := range []struct {
		name, page string
		blocks     int
		err        string
	}{
		{"marked", "x\n<!-- doc-test: compose -->\n```sh\necho a\n```\n", 1, ""},
		{"options", "<!-- doc-test: hosts each=n1,n2 stop=n3 -->\n```\nlockd\n```\n", 1, ""},
		{"unmarked", "text\n```sh\necho a\n```\n", 0, "without a <!-- doc-test"},
		{"marker too far", "<!-- doc-test: compose -->\n\n```sh\necho a\n```\n", 0, "without a"},
		{"unclosed", "<!-- doc-test: listing -->\n```\na\n", 0, "not closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "page.md")
			if err := os.WriteFile(p, []byte(tc.page), 0o644); err != nil {
				t.Fatal(err)
			}
			bs, err := docBlocks(p)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || len(bs) != tc.blocks {
				t.Fatalf("got %d blocks, error %v; want %d, %q", len(bs), err, tc.blocks, tc.err)
			}
		})
	}
}

func TestDocOperations(t *testing.T) { runDocPage(t, "operations.md") }

func TestDocSecurity(t *testing.T) { runDocPage(t, "security.md") }

// runDocPage runs every block of docs/<page> in order.
func runDocPage(t *testing.T, page string) {
	needBinary(t)
	if lockdtest.ProvokedElections() {
		// Not a flaw of the page: what a reader types answers for the
		// cluster as it is at that instant, and is not repeated.
		t.Skip("provoked elections: the blocks are a reader's commands run as typed, each sent once " +
			"(curl; lockd health, which fails while no leader is known; lockd leave): an election between two " +
			"of them is an answer the reader would retry by hand, which a block cannot. They run at production " +
			"timing (make test)")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := docBlocks(filepath.Join(root, "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	d := &docPage{t: t, root: root, work: t.TempDir(), hostAddrs: map[string]string{}}
	for _, b := range blocks {
		where := fmt.Sprintf("docs/%s:%d (%s)", page, b.line, b.kind)
		switch b.kind {
		case "compose":
			d.composeCluster()
			done := d.expectExits(where, d.compose, b)
			d.shell(where, b.text, d.composeEnv, true)
			done()
		case "fresh":
			d.shell(where, b.text, d.freshNode(), false)
		case "hosts":
			d.hostsBlock(where, b)
		case "docker":
			if os.Getenv("LOCKD_DOC_DOCKER") != "1" {
				t.Logf("%s: needs Docker (LOCKD_DOC_DOCKER=1 runs it)", where)
				continue
			}
			d.dockerBlock(where, b)
		case "listing":
		case "skip":
			if b.opts["reason"] == "" {
				t.Errorf("%s: skip without reason=", where)
			}
		default:
			t.Errorf("%s: unknown kind %q", where, b.kind)
		}
		if t.Failed() {
			return
		}
	}
}

// docPage is the state of one page's run.
type docPage struct {
	t          *testing.T
	root, work string
	compose    *cluster
	composeEnv *docEnv
	hosts      *cluster
	hostAddrs  map[string]string // "10.0.0.1:7001" -> "127.0.0.1:N"
	hostEnv    *docEnv
	dockerEnv  []string // of docker blocks; nil until the first one
}

// docEnv is a shell's environment and the address rewrites of its blocks.
type docEnv struct {
	vars     []string
	rewrites []string // old, new, ...
}

// baseEnv is the test's environment without LOCKD_ variables, with the
// built lockd and lockctl first on PATH.
func (d *docPage) baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOCKD_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+filepath.Dir(lockdBin)+":"+filepath.Dir(lockctlBin)+":"+os.Getenv("PATH"))
	return append(env, extra...)
}

// certsDir makes ./certs as the compose file's certs service does.
func (d *docPage) certsDir() {
	if _, err := os.Stat(filepath.Join(d.work, "certs", "ca.pem")); err == nil {
		return
	}
	cmd := exec.Command(lockdBin, "tls", "init", "--out", "certs", "--gossip-key", "--client", "admin",
		"--node", "n1", "--node", "n2", "--node", "n3")
	d.run("lockd tls init", cmd, d.work, d.baseEnv())
}

// composeArgs are a node's flags in the compose file, with its files.
func (d *docPage) composeArgs(id string) []string {
	f := func(name string) string { return filepath.Join(d.work, "certs", name) }
	return []string{"--tls-ca", f("ca.pem"), "--tls-cert", f(id + ".pem"), "--tls-key", f(id + "-key.pem"),
		"--gossip-key", f("gossip.key")}
}

// composeCluster starts the compose-like cluster on first use and
// bootstraps its ACLs.
func (d *docPage) composeCluster() {
	if d.compose != nil {
		return
	}
	d.certsDir()
	conf, err := certs.ClientConfig(filepath.Join(d.work, "certs", "ca.pem"), "", "")
	if err != nil {
		d.t.Fatal(err)
	}
	d.compose = startClusterWith(d.t, 3, newTLSClient(conf), d.composeArgs, "--acl")
	d.compose.waitLeader(d.compose.nodes, 60*time.Second)
	d.composeEnv = &docEnv{vars: []string{"LOCKD_CACERT=certs/ca.pem", "LOCKD_ADDR=" + d.compose.nodes[0].httpAddr}}
	for i, nd := range d.compose.nodes {
		d.composeEnv.rewrites = append(d.composeEnv.rewrites, fmt.Sprintf("127.0.0.1:700%d", i+1), nd.httpAddr)
	}
	d.composeEnv.vars = append(d.composeEnv.vars, "LOCKD_TOKEN="+bootstrap(d.t, d.compose))
}

// expectExits stops the nodes of b's stop= and tells c that those of its
// exits= will exit; the returned function waits until they have.
func (d *docPage) expectExits(where string, c *cluster, b docBlock) func() {
	node := func(id string) *node {
		if c != nil && c.byID(id) != nil {
			return c.byID(id)
		}
		d.t.Fatalf("%s: no node %s started for the page", where, id)
		return nil
	}
	if id := b.opts["stop"]; id != "" {
		c.kill(node(id))
	}
	var waits []<-chan struct{}
	for _, id := range strings.Split(b.opts["exits"], ",") {
		if id != "" {
			waits = append(waits, node(id).exits())
		}
	}
	return func() {
		for _, ch := range waits {
			select {
			case <-ch:
			case <-time.After(90 * time.Second):
				d.t.Fatalf("%s: a node of exits=%s did not exit within 90s", where, b.opts["exits"])
			}
		}
	}
}

// bootstrap makes c's management token and returns its secret.
func bootstrap(t *testing.T, c *cluster) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	secret, err := c.api.bootstrapACL(ctx, c.nodes[0].httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// freshNode starts a new one-node cluster with the compose flags, not
// bootstrapped, and returns its shell environment.
func (d *docPage) freshNode() *docEnv {
	d.certsDir()
	conf, err := certs.ClientConfig(filepath.Join(d.work, "certs", "ca.pem"), "", "")
	if err != nil {
		d.t.Fatal(err)
	}
	c := startClusterWith(d.t, 1, newTLSClient(conf), d.composeArgs, "--acl")
	c.waitLeader(c.nodes, 60*time.Second)
	return &docEnv{vars: []string{"LOCKD_CACERT=certs/ca.pem", "LOCKD_ADDR=" + c.nodes[0].httpAddr},
		rewrites: []string{"127.0.0.1:7001", c.nodes[0].httpAddr}}
}

// shell runs a block in bash in the page's directory; keep: what it
// exports is kept in env for the next block.
func (d *docPage) shell(where, text string, env *docEnv, keep bool) {
	text = strings.NewReplacer(env.rewrites...).Replace(text)
	state := filepath.Join(d.work, ".env-"+fmt.Sprintf("%p", env))
	script := "set -eo pipefail\n" + text
	if keep {
		script = fmt.Sprintf("[ ! -f %[1]q ] || . %[1]q\n%s\nexport -p > %[1]q\n", state, script)
	}
	d.run(where, exec.Command("bash", "-c", script), d.work, d.baseEnv(env.vars...))
}

// run runs cmd (bounded to 2 minutes) and fails the test when it fails or
// prints a lockd error body.
func (d *docPage) run(where string, cmd *exec.Cmd, dir string, env []string) {
	d.t.Helper()
	d.runFor(where, cmd, dir, env, 2*time.Minute)
}

// runFor is run bounded to limit.
func (d *docPage) runFor(where string, cmd *exec.Cmd, dir string, env []string, limit time.Duration) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Dir, c.Env = dir, env
	out, err := c.CombinedOutput()
	switch {
	case err != nil:
		d.t.Errorf("%s: %v\n%s\n%s", where, err, strings.Join(cmd.Args, " "), out)
	case strings.Contains(string(out), `"error":{`):
		d.t.Errorf("%s: answered an error:\n%s", where, out)
	default:
		d.t.Logf("%s: ok\n%s", where, out)
	}
}

// TestLeaveWithTheNodesCertificate is `docker-compose exec -T n3 /lockd
// leave` on the compose cluster (ACLs on): inside the container lockd
// leave has no token, only the node's own files in LOCKD_TLS_*, and that
// is enough; without a certificate or a token it is refused. On the way,
// no node logs any part of a token's secret.
func TestLeaveWithTheNodesCertificate(t *testing.T) {
	needBinary(t)
	d := &docPage{t: t, work: t.TempDir(), hostAddrs: map[string]string{}}
	d.composeCluster()
	n3 := d.compose.byID("n3")
	f := func(name string) string { return filepath.Join(d.work, "certs", name) }
	leave := func(env ...string) (string, error) {
		cmd := exec.Command(lockdBin, "leave", "--addr", n3.httpAddr)
		cmd.Env = d.baseEnv(env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := leave("LOCKD_TLS_CA=" + f("ca.pem"))
	if err == nil || !strings.Contains(out, "401") {
		t.Fatalf("leave without a certificate or a token: %v, %s; want a 401 refusal", err, out)
	}
	exited := n3.exits()
	if out, err := leave("LOCKD_TLS_CA="+f("ca.pem"), "LOCKD_TLS_CERT="+f("n3.pem"), "LOCKD_TLS_KEY="+f("n3-key.pem")); err != nil {
		t.Fatalf("leave with the node's own certificate: %v\n%s", err, out)
	}
	select {
	case <-exited:
	case <-time.After(90 * time.Second):
		t.Fatal("n3 did not stop within 90s of leaving")
	}
	rest := d.compose.others(n3)
	noSecretInLogs(t, d, rest)
	eventually(t, 60*time.Second, "n3 gone from the configuration", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := d.compose.api.status(ctx, rest[0].httpAddr)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if m.ID == "n3" && m.Voter {
				return false, fmt.Sprintf("%+v", st.Members)
			}
		}
		return true, ""
	})
}

// noSecretInLogs: after lockctl calls with the management token and with
// a wrong one (a denial, which is logged), no node's log holds any part
// of either secret.
func noSecretInLogs(t *testing.T, d *docPage, nodes []*node) {
	t.Helper()
	const wrong = "Wr0ngSecretThatNoNodeKnowsAtAll-1234567"
	var secret string
	for _, kv := range d.composeEnv.vars {
		if v, ok := strings.CutPrefix(kv, "LOCKD_TOKEN="); ok {
			secret = v
		}
	}
	for _, tok := range []string{secret, wrong} {
		for _, args := range [][]string{{"locks"}, {"acl", "tokens"}, {"lock", "--wait", "0", "jobs/x", "--", "true"}} {
			cmd := exec.Command(lockctlBin, args...)
			cmd.Dir, cmd.Env = d.work, d.baseEnv(append(d.composeEnv.vars, "LOCKD_TOKEN="+tok)...)
			_ = cmd.Run() // the wrong token's calls fail: that is the point
		}
	}
	denials := 0
	for _, nd := range nodes {
		b, err := os.ReadFile(nd.logPath)
		if err != nil {
			t.Fatal(err)
		}
		denials += strings.Count(string(b), "request denied")
		for _, tok := range []string{secret, wrong} {
			for i := 0; i+6 <= len(tok); i++ {
				if strings.Contains(string(b), tok[i:i+6]) {
					t.Errorf("%s's log holds %q of a token's secret", nd.id, tok[i:i+6])
					break
				}
			}
		}
	}
	if denials == 0 {
		t.Error("no node logged a denial of the wrong token: the logs show nothing of what the test checks")
	}
}
