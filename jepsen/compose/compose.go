// Package compose drives a lockd cluster defined by the repository's
// docker-compose.yml through Debian's docker-compose (1.29) and the docker
// CLI: bring it up and down, find containers, their addresses and
// process ids, and read every node's /v1/status.
//
// The cluster runs the jepsen suite's build of lockd (BuildImage): the
// compose file with the suite's layer on top (LayerFile) runs
// DefaultImage, whose nodes take the suite's flags (--unsafe,
// --test-clock-hook) from the environment (Cluster.Env).
//
// Several clusters can run side by side: each Cluster has its own compose
// project name, subnet (LOCKD_SUBNET) and host port prefix
// (LOCKD_PORT_PREFIX); see the header of docker-compose.yml.
package compose

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/raftnode/certs"
)

// Default values of a Cluster's fields, the same as docker-compose.yml's
// but for the image, LayerFile's.
const (
	DefaultProject    = "lockd"
	DefaultSubnet     = "10.77.0"
	DefaultPortPrefix = "700"
	// DefaultImage is the suite's image: lockd built with FaultsTag
	// (BuildImage).
	DefaultImage = "lockd:faults"
)

// The jepsen suite's build.
const (
	// FaultsTag is the build tag of lockd made for the suite: it adds
	// the suite's flags, --unsafe (the negative controls) and
	// --test-clock-hook (the clock nemesis), which a production lockd
	// has not.
	FaultsTag = "lockd_faults"
	// faultsBinary is where BuildImage puts that lockd, beside the
	// production one in bin/lockd.
	faultsBinary = "bin/faults/lockd"
	// LayerFile, in the repository, is the suite's layer over
	// docker-compose.yml: every service on DefaultImage, and the suite's
	// flags from the environment.
	LayerFile = "jepsen/compose/jepsen.yml"
)

// UpTimeout bounds how long Up waits for the cluster to become healthy.
var UpTimeout = 90 * time.Second

// Cluster is one compose project of lockd nodes n1..nNodes.
type Cluster struct {
	// Dir is the directory holding docker-compose.yml (the repo root).
	Dir string
	// Project is the compose project name (-p); DefaultProject if empty.
	Project string
	// Nodes is 3 or 5 (5 enables the compose profile "five").
	Nodes int
	// Subnet is the first three octets of the cluster network
	// (LOCKD_SUBNET); DefaultSubnet if empty. Node k has Subnet.1k.
	Subnet string
	// PortPrefix is the host port prefix (LOCKD_PORT_PREFIX): node k's
	// HTTP API is published on 127.0.0.1:<PortPrefix>k. DefaultPortPrefix
	// if empty.
	PortPrefix string
	// Env is extra environment for docker-compose, e.g. "LOCKD_UNSAFE=..."
	// (LayerFile passes it to the nodes).
	Env []string
	// CertsDir is the host directory of the cluster's certificates and
	// gossip key (LOCKD_CERTS), which the compose file's certs service
	// fills; "" means jepsen/results/certs-<project> under Dir, so that
	// clusters side by side (other subnets, so other addresses in the
	// node certificates) keep theirs apart.
	CertsDir string
	// Token is a management token for the operator calls the nemesis
	// makes (the clock hook); "" for a cluster without ACLs.
	Token string
	// DataDirs are host directories used as the nodes' data dirs
	// (LOCKD_DATA_N<k>) instead of their volumes: the disk nemesis fills
	// them. Nodes not listed keep their volume.
	DataDirs map[string]string
	// FailingDisks, where set, fail the writes of a node's data dir on
	// demand (the disk nemesis's EIO faults; a faultfs mirror mounted at
	// its DataDirs entry).
	FailingDisks map[string]WriteFailer
	// Images are the nodes' images (LOCKD_IMAGE_N<k>) where not
	// DefaultImage: the upgrade nemesis starts on an older build.
	Images map[string]string

	// ids are the server ids of nodes replaced under a new one
	// (ReplaceAs), LOCKD_ID_N<k>; a node not listed runs as its name.
	idsMu sync.Mutex
	ids   map[string]string

	tlsOnce sync.Once
	tlsConf *tls.Config
	tlsErr  error
}

// WriteFailer makes a disk fail every write with EIO (on) or work again
// (off).
type WriteFailer interface {
	FailWrites(on bool)
}

// Status is a node's GET /v1/status answer (the Go client's type).
type Status = client.Status

// Member is a member in a Status.
type Member = client.Member

// Voters counts the members of s that are voters.
func Voters(s *Status) int {
	n := 0
	for _, m := range s.Members {
		if m.Voter {
			n++
		}
	}
	return n
}

func (c *Cluster) project() string {
	if c.Project == "" {
		return DefaultProject
	}
	return c.Project
}

func (c *Cluster) subnet() string {
	if c.Subnet == "" {
		return DefaultSubnet
	}
	return c.Subnet
}

func (c *Cluster) certsDir() string {
	if c.CertsDir != "" {
		return c.CertsDir
	}
	return filepath.Join(c.Dir, "jepsen", "results", "certs-"+c.project())
}

// TLS returns the client TLS config of the cluster's HTTPS APIs: its CA,
// and the admin client certificate. The certs service writes both when
// the cluster first comes up.
func (c *Cluster) TLS() (*tls.Config, error) {
	c.tlsOnce.Do(func() {
		dir := c.certsDir()
		c.tlsConf, c.tlsErr = client.TLSConfig(filepath.Join(dir, "ca.pem"),
			filepath.Join(dir, "admin.pem"), filepath.Join(dir, "admin-key.pem"))
	})
	return c.tlsConf, c.tlsErr
}

func (c *Cluster) portPrefix() string {
	if c.PortPrefix == "" {
		return DefaultPortPrefix
	}
	return c.PortPrefix
}

func (c *Cluster) nodes() int {
	if c.Nodes <= 0 {
		return 3
	}
	return c.Nodes
}

// Names returns the node names n1..nN.
func (c *Cluster) Names() []string {
	out := make([]string, c.nodes())
	for i := range out {
		out[i] = "n" + strconv.Itoa(i+1)
	}
	return out
}

func nodeNum(node string) (int, error) {
	k, err := strconv.Atoi(strings.TrimPrefix(node, "n"))
	if err != nil || !strings.HasPrefix(node, "n") || k < 1 || k > 9 {
		return 0, fmt.Errorf("compose: bad node name %q (want n1..n5)", node)
	}
	return k, nil
}

// HTTPAddr returns node's HTTP API address as published on the host
// (127.0.0.1:<PortPrefix>k), or "" for a bad node name.
func (c *Cluster) HTTPAddr(node string) string {
	k, err := nodeNum(node)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("127.0.0.1:%s%d", c.portPrefix(), k)
}

// IP returns node's address on the cluster network (Subnet.1k), or "".
func (c *Cluster) IP(node string) string {
	k, err := nodeNum(node)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s.1%d", c.subnet(), k)
}

// NodeByIP returns the node whose cluster address is ip (without port), or "".
func (c *Cluster) NodeByIP(ip string) string {
	for _, n := range c.Names() {
		if c.IP(n) == ip {
			return n
		}
	}
	return ""
}

// Environ returns the environment docker-compose runs with.
func (c *Cluster) Environ() []string {
	env := append(os.Environ(),
		"LOCKD_SUBNET="+c.subnet(),
		"LOCKD_PORT_PREFIX="+c.portPrefix(),
		"LOCKD_CERTS="+c.certsDir(),
	)
	for node, dir := range c.DataDirs {
		env = append(env, "LOCKD_DATA_"+strings.ToUpper(node)+"="+dir)
	}
	for node, image := range c.Images {
		env = append(env, "LOCKD_IMAGE_"+strings.ToUpper(node)+"="+image)
	}
	c.idsMu.Lock()
	for node, id := range c.ids {
		env = append(env, "LOCKD_ID_"+strings.ToUpper(node)+"="+id)
	}
	c.idsMu.Unlock()
	return append(env, c.Env...)
}

// ID returns the raft server id node runs as: its name, unless ReplaceAs
// gave it a new one.
func (c *Cluster) ID(node string) string {
	c.idsMu.Lock()
	defer c.idsMu.Unlock()
	if id := c.ids[node]; id != "" {
		return id
	}
	return node
}

// LearnIDs asks every running node which server id it runs as (its
// container's --node-id), so that a Cluster made for a running project —
// `lockjepsen nemesis` after `lockjepsen run --keep` — knows the nodes
// ReplaceAs gave new ids. A node that is not running keeps what it had.
func (c *Cluster) LearnIDs(ctx context.Context) {
	for _, n := range c.Names() {
		id, err := c.Container(ctx, n)
		if err != nil {
			continue
		}
		out, err := Docker(ctx, "inspect", "--format", "{{json .Config.Cmd}}", id)
		if err != nil {
			continue
		}
		var cmd []string
		if json.Unmarshal([]byte(out), &cmd) != nil {
			continue
		}
		if i := slices.Index(cmd, "--node-id"); i >= 0 && i+1 < len(cmd) && cmd[i+1] != n {
			c.idsMu.Lock()
			if c.ids == nil {
				c.ids = map[string]string{}
			}
			c.ids[n] = cmd[i+1]
			c.idsMu.Unlock()
		}
	}
}

// NodeByID returns the node that runs as server id, or "" when none does
// (an id a node was replaced from).
func (c *Cluster) NodeByID(id string) string {
	for _, n := range c.Names() {
		if c.ID(n) == id {
			return n
		}
	}
	return ""
}

func (c *Cluster) composeArgs(args ...string) []string {
	base := []string{"-f", "docker-compose.yml", "-f", LayerFile, "-p", c.project()}
	// n4 and n5 are in the compose file's "five" profile: a 5-node
	// cluster, a 3-node one grown by the membership nemesis (the command
	// names them), and every down (a grown node must go too).
	if c.nodes() > 3 || len(args) > 0 && args[0] == "down" || slices.Contains(args, "n4") || slices.Contains(args, "n5") {
		base = append(base, "--profile", "five")
	}
	return append(base, args...)
}

// run runs name args in dir with env and returns its stdout; errors
// carry the command and its stderr.
func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "),
			err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// Compose runs docker-compose (or, where only the plugin is installed,
// `docker compose`) with the cluster's project, profile and environment
// and returns its stdout.
func (c *Cluster) Compose(ctx context.Context, args ...string) (string, error) {
	return c.composeWith(ctx, nil, args...)
}

// composeWith is Compose with env added to the cluster's environment.
func (c *Cluster) composeWith(ctx context.Context, env []string, args ...string) (string, error) {
	full := append(c.Environ(), env...)
	if _, err := exec.LookPath("docker-compose"); err != nil {
		return run(ctx, c.Dir, full, "docker", append([]string{"compose"}, c.composeArgs(args...)...)...)
	}
	return run(ctx, c.Dir, full, "docker-compose", c.composeArgs(args...)...)
}

// Docker runs the docker CLI and returns its stdout.
func Docker(ctx context.Context, args ...string) (string, error) {
	return run(ctx, "", nil, "docker", args...)
}

// BuildImage builds the suite's lockd (FaultsTag) and DefaultImage from
// it in the repo root dir, like make jepsen-image.
func BuildImage(ctx context.Context, dir string) error {
	env := append(os.Environ(), "CGO_ENABLED=0")
	if _, err := run(ctx, dir, env, "go", "build", "-trimpath", "-tags", FaultsTag, "-o", faultsBinary, "./cmd/lockd"); err != nil {
		return err
	}
	_, err := run(ctx, dir, nil, "docker", "build", "--build-arg", "LOCKD_BIN="+faultsBinary, "-t", DefaultImage, ".")
	return err
}

// BuildImageAt builds the image tag from the lockd of git ref ref of the
// repository in dir (a worktree of its own, removed afterwards): the
// upgrade nemesis's previous release. It is built with FaultsTag too, so
// that its nodes take the suite's flags (a build from before the tag
// had them anyway), and put where that ref's Dockerfile takes it.
func BuildImageAt(ctx context.Context, dir, ref, tag string) error {
	tree, err := os.MkdirTemp("", "lockd-"+tag+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tree)
	if _, err := run(ctx, dir, nil, "git", "worktree", "add", "--detach", "-f", tree, ref); err != nil {
		return err
	}
	defer func() { _, _ = run(context.Background(), dir, nil, "git", "worktree", "remove", "--force", tree) }()
	env := append(os.Environ(), "CGO_ENABLED=0")
	if _, err := run(ctx, tree, env, "go", "build", "-trimpath", "-tags", FaultsTag, "-o", "bin/lockd", "./cmd/lockd"); err != nil {
		return err
	}
	_, err = run(ctx, tree, nil, "docker", "build", "-t", tag, ".")
	return err
}

// SetImage recreates node's container from image, keeping its data
// (docker-compose up --no-deps, after a graceful stop so that a leader
// hands over first); env is added to the cluster's environment for this
// container only.
func (c *Cluster) SetImage(ctx context.Context, node, image string, env ...string) error {
	if id, err := c.Container(ctx, node); err == nil {
		if _, err := Docker(ctx, "stop", "-t", "30", id); err != nil {
			return err
		}
	}
	if c.Images == nil {
		c.Images = map[string]string{}
	}
	c.Images[node] = image
	_, err := c.composeWith(ctx, env, "up", "-d", "--no-deps", node)
	return err
}

// Up starts n1..nN (docker-compose up -d) and waits, at most UpTimeout,
// until Healthy: every node answers, all agree on one leader, and it
// lists N voters.
func (c *Cluster) Up(ctx context.Context) error {
	if _, err := c.Compose(ctx, append([]string{"up", "-d"}, c.Names()...)...); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, UpTimeout)
	defer cancel()
	return c.WaitHealthy(wctx)
}

// Down stops and removes the containers, network and data volumes
// (docker-compose down -v).
func (c *Cluster) Down(ctx context.Context) error {
	_, err := c.Compose(ctx, "down", "-v", "--remove-orphans", "-t", "5")
	return err
}

// Container returns node's container id, found by its compose labels
// (works for docker-compose 1.29 and docker compose v2 naming alike);
// an error if the container does not exist.
func (c *Cluster) Container(ctx context.Context, node string) (string, error) {
	out, err := Docker(ctx, "ps", "-aq",
		"--filter", "label=com.docker.compose.project="+c.project(),
		"--filter", "label=com.docker.compose.service="+node)
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(out)
	if id == "" {
		return "", fmt.Errorf("compose: no container for %s in project %s", node, c.project())
	}
	if i := strings.IndexByte(id, '\n'); i >= 0 {
		id = id[:i]
	}
	return id, nil
}

// State returns node's container state: running, paused, exited, ...
func (c *Cluster) State(ctx context.Context, node string) (string, error) {
	id, err := c.Container(ctx, node)
	if err != nil {
		return "", err
	}
	out, err := Docker(ctx, "inspect", "-f", "{{.State.Status}}", id)
	return strings.TrimSpace(out), err
}

// PID returns the host pid of node's process (0 if it is not running;
// a paused container keeps its pid).
func (c *Cluster) PID(ctx context.Context, node string) (int, error) {
	id, err := c.Container(ctx, node)
	if err != nil {
		return 0, err
	}
	out, err := Docker(ctx, "inspect", "-f", "{{.State.Pid}}", id)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// Status reads node's GET /v1/status over HTTPS (2 s timeout).
func (c *Cluster) Status(ctx context.Context, node string) (*Status, error) {
	conf, err := c.TLS()
	if err != nil {
		return nil, fmt.Errorf("%s: /v1/status: %w", node, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "https://"+c.HTTPAddr(node)+"/v1/status", nil)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: /v1/status: HTTP %d", node, resp.StatusCode)
	}
	var s Status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: /v1/status: %w", node, err)
	}
	return &s, nil
}

// SetClock sets node's wall-clock offset through its clock hook (PUT
// /v1/debug/clock; the nodes run with LOCKD_TEST_CLOCK_HOOK=1 or
// LOCKD_UNSAFE=wall-clock, which only the suite's build reads).
func (c *Cluster) SetClock(ctx context.Context, node string, offset time.Duration) error {
	return c.operate(ctx, node, "PUT", "/v1/debug/clock", fmt.Sprintf(`{"offset":%q}`, offset.String()), http.StatusOK)
}

// Leave makes node leave the cluster for good (POST /v1/agent/leave):
// it removes itself from the raft configuration and exits.
func (c *Cluster) Leave(ctx context.Context, node string) error {
	return c.operate(ctx, node, "POST", "/v1/agent/leave", "", http.StatusAccepted)
}

// RemoveMember asks via (any live node) to remove the server id from the
// raft configuration (DELETE /v1/members/{id}), as an operator removes a
// dead node. Until gossip has declared the node dead the answer is 409
// member_alive, an error like any other: the caller asks again
// (nemesis.RemoveThroughOthers).
func (c *Cluster) RemoveMember(ctx context.Context, via, id string) error {
	return c.operate(ctx, via, "DELETE", "/v1/members/"+id, "", http.StatusOK)
}

// Metrics reads the gauges named in names (without labels) from node's
// GET /metrics; a gauge the node does not export is left out.
func (c *Cluster) Metrics(ctx context.Context, node string, names []string) (map[string]float64, error) {
	body, err := c.Call(ctx, node, "GET", "/metrics", "", http.StatusOK)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: /metrics: %w", node, err)
	}
	out := map[string]float64{}
	for _, n := range names {
		if f := families[n]; f != nil && len(f.GetMetric()) > 0 && f.GetMetric()[0].GetGauge() != nil {
			out[n] = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return out, nil
}

// operate makes an operator call to node over HTTPS with c.Token, bounded
// by 10 s, and wants the status ok.
func (c *Cluster) operate(ctx context.Context, node, method, path, body string, ok int) error {
	_, err := c.Call(ctx, node, method, path, body, ok)
	return err
}

// Call makes a call to node over HTTPS with c.Token, bounded by 10 s,
// wants the status ok and returns the answer's body (at most 4 MiB).
func (c *Cluster) Call(ctx context.Context, node, method, path, body string, ok int) ([]byte, error) {
	conf, err := c.TLS()
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, node, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "https://"+c.HTTPAddr(node)+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, node, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s on %s: %w", method, path, node, err)
	}
	if resp.StatusCode != ok {
		return nil, fmt.Errorf("%s %s on %s: HTTP %d: %.512s", method, path, node, resp.StatusCode, bytes.TrimSpace(answer))
	}
	return answer, nil
}

// Replace deletes node's container and data volume (Remove) and
// creates them anew (docker-compose up --no-deps): a
// fresh node under the same id, with an empty data dir, which joins the
// running cluster. env is added
// to the cluster's environment for this container only.
func (c *Cluster) Replace(ctx context.Context, node string, env ...string) error {
	if err := c.Remove(ctx, node); err != nil {
		return err
	}
	_, err := c.composeWith(ctx, env, "up", "-d", "--no-deps", node)
	return err
}

// Remove deletes node's container and data volume (or empties its
// DataDirs entry); nothing of it is left.
func (c *Cluster) Remove(ctx context.Context, node string) error {
	if id, err := c.Container(ctx, node); err == nil {
		if _, err := Docker(ctx, "rm", "-f", "-v", id); err != nil {
			return err
		}
	}
	vols, err := Docker(ctx, "volume", "ls", "-q", "--filter", "label=com.docker.compose.project="+c.project(),
		"--filter", "label=com.docker.compose.volume="+node+"-data")
	if err != nil {
		return err
	}
	for _, v := range strings.Fields(vols) {
		if _, err := Docker(ctx, "volume", "rm", v); err != nil {
			return err
		}
	}
	if dir := c.DataDirs[node]; dir != "" {
		if err := emptyDir(dir); err != nil {
			return fmt.Errorf("%s: empty its data dir: %w", node, err)
		}
	}
	return nil
}

// ReplaceAs is Replace under a new server id: node comes back fresh at
// the same address, as id, with a node certificate for id signed by the
// cluster's CA. Unless the old id was removed first, the configuration
// still lists it at that address; the leader drops it when it adds id.
func (c *Cluster) ReplaceAs(ctx context.Context, node, id string, env ...string) error {
	if err := c.issueNodeCert(node, id); err != nil {
		return fmt.Errorf("%s as %s: %w", node, id, err)
	}
	c.idsMu.Lock()
	if c.ids == nil {
		c.ids = map[string]string{}
	}
	c.ids[node] = id
	c.idsMu.Unlock()
	return c.Replace(ctx, node, env...)
}

// issueNodeCert writes <id>.pem and <id>-key.pem for node's address to
// the certificates directory, as `lockd tls init --node id=IP` would.
func (c *Cluster) issueNodeCert(node, id string) error {
	dir := c.certsDir()
	if _, err := os.Stat(filepath.Join(dir, id+".pem")); err == nil {
		return nil // an earlier run of this project issued it
	}
	ca, err := certs.LoadAuthority(dir)
	if err != nil {
		return err
	}
	cert, key, err := ca.Node(id, []net.IP{net.ParseIP(c.IP(node))}, nil)
	if err != nil {
		return err
	}
	return certs.WriteKeyPair(dir, id, cert, key)
}

// emptyDir removes everything inside dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// WaitExited waits until node's container has stopped (a node that left
// exits by itself).
func (c *Cluster) WaitExited(ctx context.Context, node string) error {
	for {
		st, err := c.State(ctx, node)
		if err == nil && (st == "exited" || st == "dead") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still %s: %w", node, st, ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Statuses reads every node's status concurrently; a node that does not
// answer has a nil entry.
func (c *Cluster) Statuses(ctx context.Context) map[string]*Status {
	names := c.Names()
	type res struct {
		n string
		s *Status
	}
	ch := make(chan res, len(names))
	for _, n := range names {
		go func() {
			s, _ := c.Status(ctx, n)
			ch <- res{n, s}
		}()
	}
	out := make(map[string]*Status, len(names))
	for range names {
		r := <-ch
		out[r.n] = r.s
	}
	return out
}

// Leader returns the node a majority of the nodes report as leader, or
// else a node that says it is the leader (the highest term wins), or ""
// when neither exists.
func (c *Cluster) Leader(ctx context.Context) (string, error) {
	st := c.Statuses(ctx)
	return c.NodeByID(leaderOf(st, len(c.Names()))), nil
}

func leaderOf(st map[string]*Status, n int) string {
	votes := map[string]int{}
	self, selfTerm := "", uint64(0)
	for _, s := range st {
		if s == nil {
			continue
		}
		if s.Leader.ID != "" {
			votes[s.Leader.ID]++
		}
		if s.State == "leader" && (self == "" || s.Term > selfTerm) {
			self, selfTerm = s.NodeID, s.Term
		}
	}
	for id, v := range votes {
		if v > n/2 {
			return id
		}
	}
	return self
}

// Healthy reports nil when every node answers, all name the same leader,
// that leader says state=leader and lists N voters; else why not.
func (c *Cluster) Healthy(ctx context.Context) error {
	st := c.Statuses(ctx)
	names := c.Names()
	leader := ""
	for _, n := range names {
		s := st[n]
		if s == nil {
			return fmt.Errorf("%s does not answer", n)
		}
		if s.Leader.ID == "" {
			return fmt.Errorf("%s knows no leader", n)
		}
		if leader == "" {
			leader = s.Leader.ID
		} else if s.Leader.ID != leader {
			return fmt.Errorf("leaders disagree: %s says %s, another %s", n, s.Leader.ID, leader)
		}
	}
	ls := st[c.NodeByID(leader)]
	if ls == nil || ls.State != "leader" {
		return fmt.Errorf("%s is named leader but is not", leader)
	}
	return c.checkVoters(ls)
}

// checkVoters reports nil when the leader's status ls lists as voters
// exactly the ids the nodes run as: not an id a node was replaced from.
func (c *Cluster) checkVoters(ls *Status) error {
	for _, m := range ls.Members {
		if m.Voter && c.NodeByID(m.ID) == "" {
			return fmt.Errorf("leader %s lists %s as a voter, which no node runs as", ls.NodeID, m.ID)
		}
	}
	if v := Voters(ls); v != len(c.Names()) {
		return fmt.Errorf("leader %s lists %d voters, want %d", ls.NodeID, v, len(c.Names()))
	}
	return nil
}

// WaitHealthy polls Healthy every 500 ms until it passes or ctx ends
// (give ctx a deadline).
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		if last = c.Healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s not healthy: %w (%v)", c.project(), last, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// WaitNode polls until node answers /v1/status and knows a leader, or
// ctx ends.
func (c *Cluster) WaitNode(ctx context.Context, node string) error {
	for {
		s, err := c.Status(ctx, node)
		if err == nil && s.Leader.ID != "" {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("%s knows no leader", node)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not up: %w (%v)", node, err, ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// SaveLogs writes docker logs of every node to dir/<node>.log.
func (c *Cluster) SaveLogs(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var firstErr error
	for _, n := range c.Names() {
		id, err := c.Container(ctx, n)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		out, err := exec.CommandContext(ctx, "docker", "logs", "-t", id).CombinedOutput()
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, n+".log"), out, 0o644)
		} else {
			err = fmt.Errorf("docker logs %s: %w: %s", n, err, bytes.TrimSpace(out))
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// Converged reports nil when every node answers with the same
// applied_index and digest (an idle, healed cluster), else why not.
func (c *Cluster) Converged(ctx context.Context) error {
	st := c.Statuses(ctx)
	var ref *Status
	for _, n := range c.Names() {
		s := st[n]
		if s == nil {
			return fmt.Errorf("%s does not answer", n)
		}
		if ref == nil {
			ref = s
		} else if s.AppliedIndex != ref.AppliedIndex || s.Digest != ref.Digest {
			return fmt.Errorf("%s at applied %d digest %.12s, %s at %d %.12s",
				s.NodeID, s.AppliedIndex, s.Digest, ref.NodeID, ref.AppliedIndex, ref.Digest)
		}
	}
	return nil
}

// WaitConverged polls Converged every 500 ms until it passes or ctx
// ends. After a heal, raft's replication backoff can take ~10 s before
// a cut-off follower catches up.
func (c *Cluster) WaitConverged(ctx context.Context) error {
	var last error
	for {
		if last = c.Converged(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s not converged: %w (%v)", c.project(), last, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
