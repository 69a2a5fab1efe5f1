package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockd/lockd/api"
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
	Unsafe                                     string
}

// unsafeNoConsensus is the only --unsafe mode: every node bootstraps a
// one-voter cluster of its own and skips gossip, so each grants locks from
// its own table. It exists so that the Jepsen suite can prove its
// checkers catch a lock service without consensus (a negative control).
const unsafeNoConsensus = "no-consensus"

// envUnsafe is the default of --unsafe, so that a compose file can switch
// it on for a whole cluster without changing every node's command line.
const envUnsafe = "LOCKD_UNSAFE"

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
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", 0, "log entries since the last snapshot that make a new one (0: raft's 8192)")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", 0, "how often to check the snapshot threshold (0: raft's 2m)")
	fs.Uint64Var(&c.TrailingLogs, "trailing-logs", 0, "log entries kept behind a snapshot for slow followers (0: raft's 10240)")
	fs.StringVar(&c.Unsafe, "unsafe", os.Getenv(envUnsafe),
		"TESTING ONLY, breaks every guarantee: \""+unsafeNoConsensus+"\" makes this node a cluster of its own (default $"+envUnsafe+")")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (subcommands: health, leave)", fs.Args())
	}
	for _, a := range strings.Split(*join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.Join = append(c.Join, a)
		}
	}
	if c.Dev {
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
			return nil, errors.New("--dev runs a single node: it takes no --join or --bootstrap-expect")
		}
	}
	return c, c.check()
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
	case c.Unsafe != "" && c.Unsafe != unsafeNoConsensus:
		return fmt.Errorf("--unsafe %q: the only mode is %q", c.Unsafe, unsafeNoConsensus)
	case hclog.LevelFromString(c.LogLevel) == hclog.NoLevel:
		return fmt.Errorf("--log-level %q is not trace, debug, info, warn or error", c.LogLevel)
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
