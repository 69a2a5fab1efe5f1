package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/api"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode"
)

// config is everything the flags say.
type config struct {
	NodeID, DataDir                            string
	HTTPAddr, RaftAddr, GossipAddr             string
	HTTPAdvertise, RaftAdvertise, GossipAdvert string
	Join                                       []string
	BootstrapExpect                            int
	Dev                                        bool
	LogLevel                                   string
	LogJSON                                    bool
	MaxWait                                    time.Duration
	RaftTiming                                 float64
	SnapshotThreshold, TrailingLogs            uint64
	SnapshotInterval                           time.Duration
	RaftLog                                    string // raftnode.LogBolt, raftnode.LogWAL or "" (the data dir's, wal for a new one)
	// harness is what the jepsen suite's flags ask of this node: nothing
	// in a production build (harness.go).
	harness harness

	// TLSCA, TLSCert and TLSKey are PEM files, all three or none.
	TLSCA, TLSCert, TLSKey string
	TLSClientAuth          bool   // HTTP API clients need a certificate from TLSCA
	GossipKeyFile          string // --gossip-key
	GossipKey              []byte // decoded from GossipKeyFile by check
	// Insecure lets the node listen beyond loopback without TLS and a
	// gossip key.
	Insecure bool
	// ACL: every request needs a token (docs/security.md).
	ACL bool
	// Limits are what this node stamps into sessions and acquires while
	// it leads (lockstate.Limits).
	Limits lockstate.Limits
	// Node-local limits (api.Config).
	MaxWaits, MaxStreams, MaxConns int
	MaxLeaderWaits                 int
	MaxStreamDuration              time.Duration
	// Origins are the browser origins given CORS access (--cors-origin).
	Origins []string
}

// envACL set to 1 turns --acl on, so that a compose file can keep ACLs on
// by default while a test harness switches them off for a whole cluster.
const envACL = "LOCKD_ACL"

// envFlags are flags whose default an environment variable may set (the
// command line still wins), so that a compose file can tune a whole
// cluster: the jepsen suite's snapshots-during-faults runs do.
var envFlags = map[string]string{
	"snapshot-threshold": "LOCKD_SNAPSHOT_THRESHOLD",
	"snapshot-interval":  "LOCKD_SNAPSHOT_INTERVAL",
	"trailing-logs":      "LOCKD_TRAILING_LOGS",
	"raft-log":           "LOCKD_RAFT_LOG",
}

// setFromEnv sets the envFlags whose variable is set and not empty.
func setFromEnv(fs *flag.FlagSet) error {
	for name, env := range envFlags {
		if v := os.Getenv(env); v != "" {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("$%s (--%s): %w", env, name, err)
			}
		}
	}
	return nil
}

func parseFlags(args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("lockd", flag.ContinueOnError)
	fs.StringVar(&c.NodeID, "node-id", "", "unique, stable id of this node (raft server id)")
	fs.StringVar(&c.DataDir, "data-dir", "", "directory for the raft log, stable store and snapshots")
	fs.StringVar(&c.HTTPAddr, "http-addr", "127.0.0.1:7001", "host:port the HTTP API listens on")
	fs.StringVar(&c.RaftAddr, "raft-addr", "127.0.0.1:7101", "host:port the raft transport listens on")
	fs.StringVar(&c.GossipAddr, "gossip-addr", "127.0.0.1:7201", "host:port gossip (memberlist, TCP and UDP) listens on")
	fs.StringVar(&c.HTTPAdvertise, "http-advertise", "", "HTTP address other nodes use (default: --http-addr)")
	fs.StringVar(&c.RaftAdvertise, "raft-advertise", "", "raft address other nodes dial (default: --raft-addr)")
	fs.StringVar(&c.GossipAdvert, "gossip-advertise", "", "gossip address other nodes use, IP:port (default: --gossip-addr)")
	join := fs.String("join", "", "comma-separated gossip addresses of other nodes to join")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 0, "bootstrap a new cluster once this many nodes see each other (0: only join an existing one)")
	fs.BoolVar(&c.Dev, "dev", false, "single node, data in a temporary directory, HTTP on 127.0.0.1:7001")
	fs.StringVar(&c.LogLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.BoolVar(&c.LogJSON, "log-json", false, "log JSON lines instead of text")
	fs.DurationVar(&c.MaxWait, "max-wait", api.DefaultMaxWait, "longest wait a request may ask for (acquire, long-poll, blocking query)")
	fs.Float64Var(&c.RaftTiming, "raft-timing", 1, "scale raft's heartbeat, election and lease timeouts (larger on slow machines)")
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", 0, "log entries since the last snapshot that make a new one (0: raft's 8192; default $LOCKD_SNAPSHOT_THRESHOLD)")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", 0, "how often to check the snapshot threshold (0: raft's 2m; default $LOCKD_SNAPSHOT_INTERVAL)")
	fs.StringVar(&c.RaftLog, "raft-log", "", "where a new data dir keeps the raft log: \""+raftnode.LogWAL+"\" (raft-wal segments in DATA_DIR/wal: "+
		"one fsync per commit; the default) or \""+raftnode.LogBolt+"\" (raft.db, with the term and vote); a data dir keeps the one it was made with, "+
		"and naming the other is refused")
	fs.Uint64Var(&c.TrailingLogs, "trailing-logs", 0, "log entries kept behind a snapshot for slow followers (0: raft's 10240; default $LOCKD_TRAILING_LOGS)")
	c.trustFlags(fs)
	fs.BoolVar(&c.ACL, "acl", os.Getenv(envACL) == "1", "every HTTP request except GET /v1/status needs a token (Authorization: Bearer); "+
		"POST /v1/acl/bootstrap makes the first one (default: $"+envACL+" is 1)")
	c.limitFlags(fs)
	origins := fs.String("cors-origin", "", "comma-separated browser origins (scheme://host[:port]) given CORS access; none by default")
	fs.BoolVar(&c.Insecure, "insecure", false, "listen on non-loopback addresses without --tls-* and --gossip-key: "+
		"anyone who can reach the ports can join the cluster and use the API")
	var harnessParsed func(*config) error
	if harnessFlags != nil {
		harnessParsed = harnessFlags(fs)
	}
	if err := setFromEnv(fs); err != nil {
		return nil, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (subcommands: health, leave, tls, keygen)", fs.Args())
	}
	for _, a := range strings.Split(*join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.Join = append(c.Join, a)
		}
	}
	var err error
	if c.Origins, err = api.ParseOrigins(*origins); err != nil {
		return nil, fmt.Errorf("--cors-origin: %w", err)
	}
	if c.Dev {
		if err := c.devDefaults(fs); err != nil {
			return nil, err
		}
	}
	if harnessParsed != nil {
		if err := harnessParsed(c); err != nil {
			return nil, err
		}
	}
	return c, c.check()
}

// trustFlags registers what authenticates the nodes and their clients:
// TLS and the gossip key.
func (c *config) trustFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.TLSCA, "tls-ca", "", "PEM `FILE` of the CA that signs the node certificates; with --tls-cert and --tls-key: TLS 1.3 on "+
		"the HTTP API, raft and forwarding, and only peers with a node certificate from this CA are accepted")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM `FILE` of this node's certificate (lockd tls cert)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM `FILE` of the private key of --tls-cert")
	fs.BoolVar(&c.TLSClientAuth, "tls-client-auth", false, "HTTP API clients must present a certificate signed by --tls-ca")
	fs.StringVar(&c.GossipKeyFile, "gossip-key", "", "`FILE` holding the base64 gossip key (lockd keygen; 16, 24 or 32 bytes): "+
		"gossip is encrypted and a node without the key cannot join")
}

// limitFlags registers the caps: the cluster's (replicated, in every
// entry that needs them) and this node's own.
func (c *config) limitFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Limits.Sessions, "max-sessions", 100000, "most live sessions in the cluster (0: no limit)")
	fs.IntVar(&c.Limits.HoldsPerSession, "max-holds-per-session", 10000, "most names one session may hold or wait for (0: no limit)")
	fs.IntVar(&c.Limits.WaitersPerName, "max-waiters-per-name", 10000, "most requests queued on one name (0: no limit)")
	fs.IntVar(&c.Limits.Waiters, "max-waiters", 100000, "most requests queued in the cluster (0: no limit)")
	// A tenth of the cluster's caps: one token (a runaway client, a
	// leaked secret) cannot take more than a tenth of the sessions or of
	// the queue, so nine others still fit, and 10000 is still far above
	// what one service needs (docs/operations.md).
	fs.IntVar(&c.Limits.SessionsPerToken, "max-sessions-per-token", 10000, "most live sessions one ACL token owns (0: no limit; a token's own limits override it)")
	fs.IntVar(&c.Limits.WaitersPerToken, "max-waiters-per-token", 10000, "most requests one ACL token's sessions have queued (0: no limit; a token's own limits override it)")
	fs.IntVar(&c.MaxWaits, "max-waits", api.DefaultMaxWaits, "most requests waiting on this node at once (acquires with a wait, long-polls, blocking queries)")
	fs.IntVar(&c.MaxLeaderWaits, "max-leader-waits", raftnode.DefaultMaxLeaderWaits, "most requests waiting on this node to reach a leader at once "+
		"(an election, a failover's reconnecting clients); more are answered 503 no_leader with Retry-After at once")
	fs.IntVar(&c.MaxStreams, "max-streams", api.DefaultMaxStreams, "most GET /v1/events streams on this node at once")
	fs.DurationVar(&c.MaxStreamDuration, "max-stream-duration", api.DefaultMaxStreamDuration, "how long one GET /v1/events stream lasts before the node ends it")
	fs.IntVar(&c.MaxConns, "max-conns", api.DefaultMaxConns, "most HTTP connections to this node at once; more are closed at once")
}

// devDefaults fills in what --dev implies for the flags not given.
func (c *config) devDefaults(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["node-id"] {
		c.NodeID = "dev"
	}
	if !set["raft-timing"] {
		c.RaftTiming = 0.1 // one node on loopback: elect itself in ~0.2s
	}
	if !set["raft-addr"] {
		c.RaftAddr = "127.0.0.1:0" // a free port: dev needs no fixed one
	}
	if len(c.Join) > 0 || c.BootstrapExpect > 0 {
		return errors.New("--dev runs a single node: it takes no --join or --bootstrap-expect")
	}
	return nil
}

func (c *config) check() error {
	switch {
	case c.NodeID == "":
		return errors.New("--node-id is required")
	case c.DataDir == "" && !c.Dev:
		return errors.New("--data-dir is required")
	case c.BootstrapExpect < 0:
		return errors.New("--bootstrap-expect must be 0 or more")
	case c.RaftTiming <= 0:
		return errors.New("--raft-timing must be positive")
	case c.MaxWait <= 0:
		return errors.New("--max-wait must be positive")
	case c.RaftLog != "" && c.RaftLog != raftnode.LogBolt && c.RaftLog != raftnode.LogWAL:
		return fmt.Errorf("--raft-log %q is not %q or %q", c.RaftLog, raftnode.LogBolt, raftnode.LogWAL)
	case hclog.LevelFromString(c.LogLevel) == hclog.NoLevel:
		return fmt.Errorf("--log-level %q is not trace, debug, info, warn or error", c.LogLevel)
	case min(c.MaxWaits, c.MaxStreams, c.MaxConns, c.MaxLeaderWaits) < 1 || c.MaxStreamDuration <= 0:
		return errors.New("--max-waits, --max-leader-waits, --max-streams, --max-conns and --max-stream-duration must be positive")
	case min(c.Limits.Sessions, c.Limits.HoldsPerSession, c.Limits.WaitersPerName, c.Limits.Waiters,
		c.Limits.SessionsPerToken, c.Limits.WaitersPerToken) < 0 ||
		max(c.Limits.Sessions, c.Limits.HoldsPerSession, c.Limits.WaitersPerName, c.Limits.Waiters,
			c.Limits.SessionsPerToken, c.Limits.WaitersPerToken) > 1<<30:
		return errors.New("--max-sessions, --max-holds-per-session, --max-waiters-per-name, --max-waiters, " +
			"--max-sessions-per-token and --max-waiters-per-token must be in [0, 2^30]")
	}
	if err := c.checkSecurity(); err != nil {
		return err
	}
	var err error
	if c.Dev && c.HTTPAdvertise == "" {
		// Only reported in /v1/status: no peer dials it.
		if _, port, err := net.SplitHostPort(c.HTTPAddr); err == nil {
			if _, err := advertise("http", c.HTTPAddr, ""); err != nil {
				c.HTTPAdvertise = net.JoinHostPort("127.0.0.1", port)
			}
		}
	}
	if c.HTTPAdvertise, err = advertise("http", c.HTTPAddr, c.HTTPAdvertise); err != nil {
		return err
	}
	if !c.Dev {
		if c.RaftAdvertise, err = advertise("raft", c.RaftAddr, c.RaftAdvertise); err != nil {
			return err
		}
		if c.GossipAdvert, err = advertise("gossip", c.GossipAddr, c.GossipAdvert); err != nil {
			return err
		}
	}
	return nil
}

// advertise returns the address other nodes use: the explicit one, or the
// bind address when that is a concrete host.
func advertise(what, bind, adv string) (string, error) {
	if _, _, err := net.SplitHostPort(bind); err != nil {
		return "", fmt.Errorf("--%s-addr %q: %w", what, bind, err)
	}
	if adv != "" {
		if _, _, err := net.SplitHostPort(adv); err != nil {
			return "", fmt.Errorf("--%s-advertise %q: %w", what, adv, err)
		}
		return adv, nil
	}
	host, port, _ := net.SplitHostPort(bind)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) || port == "0" {
		return "", fmt.Errorf("--%s-addr %q binds every interface or a random port: set --%s-advertise to the address other nodes reach", what, bind, what)
	}
	return bind, nil
}

// checkSecurity checks the security flags and reads the gossip key. A node
// listens on a non-loopback address only if it can authenticate whoever
// connects there (TLS for HTTP and raft, the gossip key for gossip) or
// --insecure says so: otherwise anyone who reaches a port can join the
// cluster as a voter.
func (c *config) checkSecurity() error {
	tlsOn, err := c.tlsConfigured()
	if err != nil {
		return err
	}
	if c.TLSClientAuth && !tlsOn {
		return errors.New("--tls-client-auth needs --tls-ca, --tls-cert and --tls-key")
	}
	if c.GossipKeyFile != "" {
		if c.GossipKey, err = readGossipKey(c.GossipKeyFile); err != nil {
			return err
		}
	}
	if c.Insecure {
		return nil
	}
	// --dev runs no gossip, nor does a node alone (harness): no key to
	// ask for.
	gossip := !c.Dev && !c.harness.alone
	listens := []struct{ flag, addr string }{{"http-addr", c.HTTPAddr}, {"raft-addr", c.RaftAddr}}
	if gossip {
		listens = append(listens, struct{ flag, addr string }{"gossip-addr", c.GossipAddr})
	}
	var missing []string
	if !tlsOn {
		missing = append(missing, "--tls-ca", "--tls-cert", "--tls-key")
	}
	if gossip && len(c.GossipKey) == 0 {
		missing = append(missing, "--gossip-key")
	}
	for _, l := range listens {
		if len(missing) == 0 || loopback(l.addr) {
			continue
		}
		return fmt.Errorf("--%s %s is not a loopback address: add %s, or --insecure to accept anyone who can reach it",
			l.flag, l.addr, andList(missing))
	}
	return nil
}

// tlsConfigured reports whether --tls-ca, --tls-cert and --tls-key are
// given; some without the others is an error.
func (c *config) tlsConfigured() (bool, error) {
	var given, absent []string
	for _, f := range []struct{ name, val string }{{"--tls-ca", c.TLSCA}, {"--tls-cert", c.TLSCert}, {"--tls-key", c.TLSKey}} {
		if f.val != "" {
			given = append(given, f.name)
		} else {
			absent = append(absent, f.name)
		}
	}
	if len(given) > 0 && len(absent) > 0 {
		return false, fmt.Errorf("%s given without %s: --tls-ca, --tls-cert and --tls-key go together", andList(given), andList(absent))
	}
	return len(absent) == 0, nil
}

// readGossipKey reads a key file as lockd keygen prints it: base64 of
// 16, 24 or 32 bytes (AES-128, -192 or -256, as memberlist accepts).
func readGossipKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("--gossip-key %s: not a base64 key (lockd keygen prints one): %w", path, err)
	}
	if n := len(key); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("--gossip-key %s: the key is %d bytes, want 16, 24 or 32 (lockd keygen prints 32)", path, n)
	}
	return key, nil
}

// loopback reports whether a listen address accepts only this machine.
// No host, 0.0.0.0 and :: listen everywhere; a name other than
// localhost may resolve to anything. An address that does not parse
// counts as loopback here: advertise reports it.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// andList joins flag names as "a, b and c".
func andList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
