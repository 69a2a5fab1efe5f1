// Package cluster is a lockd node's membership: memberlist gossip carrying
// each node's id and raft and HTTP addresses, --join, --bootstrap-expect
// (the lowest id bootstraps raft once enough fresh servers see each
// other), and the leader's reconciliation of the raft configuration with
// the members (alive ones added as voters, ones that left removed).
//
// Trust: gossip membership alone never makes a raft voter. With
// Config.GossipKey set, all gossip is encrypted and authenticated, so a
// node without the key cannot join the pool at all. Before the leader
// adds a member as a voter, the member must answer a direct gossip ping
// (it is alive now, not merely not yet declared dead) and pass
// Config.VerifyPeer; the node that bootstraps raft verifies every other
// bootstrap server the same way and does not bootstrap while one fails.
// A member that fails is left out, logged once per failure, and retried
// on later reconciliations. A nil VerifyPeer (--dev, --insecure) trusts
// every member of the pool.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/lockd/lockd/raftnode"
)

// Member statuses, as gossip sees them.
const (
	StatusAlive = "alive"
	StatusDead  = "dead" // failed, or unreachable: stays in the raft configuration
	StatusLeft  = "left" // left gracefully: removed from the raft configuration
)

const (
	defaultReconcileInterval = 5 * time.Second
	defaultRetryJoinInterval = time.Second
	deadNodeReclaimTime      = 10 * time.Second
	// reconnectInterval is how often a node tries to rejoin members it
	// considers failed: after a partition longer than the suspicion
	// timeout both sides think the other dead, and memberlist alone
	// would not merge them again (Serf's reconnect).
	reconnectInterval = 15 * time.Second
	// updateMetaTimeout bounds the wait for our metadata broadcast; the
	// update spreads by gossip anyway, so a timeout is only logged.
	updateMetaTimeout = time.Second
	// verifyTimeout bounds one VerifyPeer call, so that a member that
	// accepts connections but never answers cannot stall the loop.
	verifyTimeout = 5 * time.Second
)

// Config configures a Cluster.
type Config struct {
	ID              string // node id, the same as the raftnode's; also the memberlist name
	GossipBind      string // host:port memberlist listens on (TCP and UDP); port 0 picks one
	GossipAdvertise string // host:port others reach us at; "" lets memberlist choose
	RaftAddr        string // raft address to publish; "" means the node's RaftAddr()
	HTTPAddr        string // HTTP address to publish (forwarding and clients)
	// LogFormat is the newest log entry format this build applies
	// (fsm.NewestFormat), gossiped so that a leader never writes a format
	// some voter cannot apply; 0 means 1.
	LogFormat int
	Join      []string // gossip addresses to join; retried until one answers
	// BootstrapExpect > 0: bootstrap raft once this many fresh servers
	// with the same value see each other. 0: join and wait to be added.
	BootstrapExpect int
	Logger          hclog.Logger

	// GossipKey, if set, is the AES key (16, 24 or 32 bytes) that
	// encrypts and authenticates all gossip; unencrypted or otherwise
	// keyed messages are dropped, so a node without it cannot join.
	GossipKey []byte
	// VerifyPeer, if set, must accept a member (its id and published
	// raft address) before this node adds it as a raft voter or
	// bootstraps raft with it; an error leaves it out until a later try
	// succeeds. nil trusts every member of the gossip pool.
	VerifyPeer func(ctx context.Context, id, raftAddr string) error

	// LocalTimings uses memberlist.DefaultLocalConfig (loopback, tests)
	// instead of DefaultLANConfig.
	LocalTimings bool
	// Tune, if set, adjusts the memberlist configuration last (tests).
	Tune func(*memberlist.Config)
	// ReconcileInterval is how often the leader reconciles the raft
	// configuration besides on every membership event (0: 5s).
	ReconcileInterval time.Duration
	// RetryJoinInterval is the wait between join attempts (0: 1s).
	RetryJoinInterval time.Duration
	// Directory, if set, is pointed at the cluster once it runs.
	Directory *Directory
}

// Member is one node as gossip sees it.
type Member struct {
	ID         string
	HTTPAddr   string
	RaftAddr   string
	GossipAddr string
	Status     string // StatusAlive, StatusDead or StatusLeft
}

// member is what the cluster remembers of a node, also after it died or
// left, so its HTTP address stays known.
type member struct {
	meta   nodeMeta
	gossip string
	status string
}

// Cluster is a running memberlist plus the loop that bootstraps and
// reconciles raft.
type Cluster struct {
	cfg      Config
	node     *raftnode.Node
	logger   hclog.Logger
	ml       *memberlist.Memberlist
	interval time.Duration
	// gossipAddr is read once at Start: the *Node LocalNode returns is
	// memberlist's own, which UpdateNode rewrites without our lock.
	gossipAddr string

	mu        sync.Mutex
	members   map[string]*member
	meta      nodeMeta          // ours
	metaBytes []byte            // ours, encoded, for NodeMeta
	expect    int               // 0 once bootstrap is done or ruled out
	lastNote  string            // last bootstrap note logged, to log each once
	intents   map[string]string // node id -> instance that announced it leaves
	refused   map[string]string // node id -> why it was last not added, to log each once
	verified  map[string]string // node id -> raft address VerifyPeer accepted (bootstrap)

	broadcasts *memberlist.TransmitLimitedQueue // our gossip: leave intents

	bootstrapped atomic.Bool
	leaving      atomic.Bool
	reconciles   atomic.Uint64 // reconciliation rounds run as leader (tests)
	logFormat    atomic.Int64  // see LogFormat

	wake   chan struct{} // membership changed
	stopCh chan struct{}
	ctx    context.Context // ends at Shutdown, so VerifyPeer calls end too
	cancel context.CancelFunc
	wg     sync.WaitGroup

	shutdownOnce sync.Once
	shutdownErr  error
}

// Start joins (or starts) the gossip cluster and runs bootstrap and
// reconciliation for node.
func Start(cfg Config, node *raftnode.Node) (*Cluster, error) {
	if cfg.ID == "" || cfg.GossipBind == "" || node == nil {
		return nil, errors.New("cluster: Config needs ID and GossipBind, and a node")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.RaftAddr == "" {
		cfg.RaftAddr = node.RaftAddr()
	}
	if len(cfg.GossipKey) > 0 {
		if err := memberlist.ValidateKey(cfg.GossipKey); err != nil {
			return nil, fmt.Errorf("cluster: gossip key: %w", err)
		}
	}
	c := &Cluster{
		cfg:      cfg,
		node:     node,
		logger:   cfg.Logger,
		interval: cfg.ReconcileInterval,
		members:  make(map[string]*member),
		intents:  make(map[string]string),
		refused:  make(map[string]string),
		verified: make(map[string]string),
		expect:   cfg.BootstrapExpect,
		wake:     make(chan struct{}, 1),
		stopCh:   make(chan struct{}),
	}
	if c.interval <= 0 {
		c.interval = defaultReconcileInterval
	}
	instance := make([]byte, 8)
	if _, err := rand.Read(instance); err != nil {
		return nil, fmt.Errorf("cluster: instance id: %w", err)
	}
	c.meta = nodeMeta{ID: cfg.ID, Raft: cfg.RaftAddr, HTTP: cfg.HTTPAddr, Expect: cfg.BootstrapExpect,
		State: node.HasState(), Instance: hex.EncodeToString(instance), Log: max(cfg.LogFormat, 1)}
	// logFormat stays 0, not known, until a reconciliation has seen the voters.
	b, err := c.meta.encode()
	if err != nil {
		return nil, err
	}
	c.metaBytes = b

	mlc, err := c.memberlistConfig()
	if err != nil {
		return nil, err
	}
	c.broadcasts = &memberlist.TransmitLimitedQueue{
		NumNodes:       c.numAlive, // not c.ml: memberlist gossips before Create returns
		RetransmitMult: mlc.RetransmitMult,
	}
	if c.ml, err = memberlist.Create(mlc); err != nil {
		return nil, fmt.Errorf("cluster: start gossip on %s: %w", cfg.GossipBind, err)
	}
	c.gossipAddr = c.ml.LocalNode().Address() // before our loops call UpdateNode
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.logger.Info("gossip running", "addr", c.GossipAddr(), "bootstrap_expect", cfg.BootstrapExpect,
		"encrypted", len(cfg.GossipKey) > 0, "verify_peers", cfg.VerifyPeer != nil)
	if cfg.Directory != nil {
		cfg.Directory.Set(c)
	}
	// The rule that keeps an operator from removing what reconciliation
	// would add back is reconciliation's own, so the cluster sets it.
	node.SetRemoveRule(c.live)
	c.wg.Add(2)
	go c.run()
	go c.reconnect()
	if len(cfg.Join) > 0 {
		c.wg.Add(1)
		go c.retryJoin()
	}
	return c, nil
}

func (c *Cluster) memberlistConfig() (*memberlist.Config, error) {
	mlc := memberlist.DefaultLANConfig()
	if c.cfg.LocalTimings {
		mlc = memberlist.DefaultLocalConfig()
	}
	mlc.Name = c.cfg.ID
	host, port, err := splitHostPort(c.cfg.GossipBind)
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip bind address: %w", err)
	}
	mlc.BindAddr, mlc.BindPort = host, port
	mlc.AdvertisePort = port
	if c.cfg.GossipAdvertise != "" {
		host, port, err := splitHostPort(c.cfg.GossipAdvertise)
		if err != nil {
			return nil, fmt.Errorf("cluster: gossip advertise address: %w", err)
		}
		mlc.AdvertiseAddr, mlc.AdvertisePort = host, port
	}
	// A node that died may come back at another address (a container
	// with a new IP): let it reclaim its name after a while instead of
	// only once the dead entry is reaped.
	mlc.DeadNodeReclaimTime = deadNodeReclaimTime
	mlc.Delegate = delegate{c}
	mlc.Events = events{c}
	if len(c.cfg.GossipKey) > 0 {
		// memberlist builds its keyring from SecretKey; verifying both
		// directions drops every message not sealed with the key, so a
		// node without it cannot even be probed into the pool.
		mlc.SecretKey = c.cfg.GossipKey
		mlc.GossipVerifyIncoming = true
		mlc.GossipVerifyOutgoing = true
	}
	// memberlist logs through a *log.Logger; hclog infers levels from its
	// "[DEBUG]" prefixes.
	mlc.LogOutput = nil
	mlc.Logger = c.logger.Named("memberlist").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	if c.cfg.Tune != nil {
		c.cfg.Tune(mlc)
	}
	return mlc, nil
}

func splitHostPort(hp string) (string, int, error) {
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", hp)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// GossipAddr returns the address other nodes join this one at.
func (c *Cluster) GossipAddr() string { return c.gossipAddr }

// HTTPAddr returns a node's HTTP address by id, from its gossip metadata
// (also for nodes that are suspect, dead or gone); usable as
// raftnode.Config.PeerHTTP.
func (c *Cluster) HTTPAddr(id string) (string, bool) {
	if id == c.cfg.ID {
		return c.cfg.HTTPAddr, c.cfg.HTTPAddr != ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[id]
	if m == nil || m.meta.HTTP == "" {
		return "", false
	}
	return m.meta.HTTP, true
}

// Members returns every node gossip has seen, by id. Status is "alive",
// "dead" (failed: it stays a voter) or "left" (left gracefully).
// memberlist v0.6.0 does not expose suspicion (memberlist #293), so a
// suspect node shows as alive until it is declared dead.
func (c *Cluster) Members() []Member {
	c.mu.Lock()
	out := make([]Member, 0, len(c.members))
	for _, m := range c.members {
		out = append(out, Member{ID: m.meta.ID, HTTPAddr: m.meta.HTTP, RaftAddr: m.meta.Raft, GossipAddr: m.gossip, Status: m.status})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// JoinPeer reports whether id is an alive gossip member with raft state,
// other than this node: the peers a node outside any raft configuration
// (or knowing no leader) answers raft from (raftnode.Node.SetJoinRule),
// since its leader is among them. The name it is asked about is the one
// in the caller's node certificate, so gossip alone cannot claim it.
func (c *Cluster) JoinPeer(id string) bool {
	if id == c.cfg.ID {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[id]
	return m != nil && m.status == StatusAlive && m.meta.State
}

// Gone reports whether gossip has seen id fail or leave: how the quorum
// judges a voter raft has had no recent contact with
// (raftnode.Node.SetGossipGone). A node gossip has not seen is not gone.
func (c *Cluster) Gone(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.members[id]
	return m != nil && m.status != StatusAlive
}

// Bootstrapped reports whether this node bootstrapped the raft cluster.
func (c *Cluster) Bootstrapped() bool { return c.bootstrapped.Load() }

// Leave leaves the cluster for good: a leader first removes itself from
// the raft configuration (raft commits that, then steps down); the node
// then announces its departure, after which the leader removes it.
// Leave waits, within timeout, until this node sees itself removed. A
// node that merely restarts must not Leave, only Shutdown.
func (c *Cluster) Leave(timeout time.Duration) error {
	select {
	case <-c.stopCh:
		return errors.New("cluster: leave after shutdown")
	default:
	}
	deadline := time.Now().Add(timeout)
	c.leaving.Store(true)
	if c.node.Status().State == "leader" {
		c.removeSelf()
	}
	// Announce the intent first, so that the others record a leave and
	// not a failure.
	c.announceLeave(timeout / 2)
	c.removeThroughLeader(time.Until(deadline) / 2)
	if err := c.ml.Leave(time.Until(deadline)); err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for time.Now().Before(deadline) {
		if !c.inConfiguration() {
			c.logger.Info("left the cluster and the raft configuration")
			return nil
		}
		select {
		case <-t.C:
		case <-c.stopCh:
			return nil
		}
	}
	c.logger.Warn("left gossip, but the raft configuration still lists this node", "timeout", timeout)
	return nil
}

// inConfiguration reports whether this node's raft configuration still
// lists it.
func (c *Cluster) inConfiguration() bool {
	servers, err := c.node.Servers()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(servers, func(s raftnode.Server) bool { return s.ID == c.cfg.ID })
}

// Shutdown stops gossip (without a leave message: to the others this node
// failed) and the cluster's loops. Safe to call twice.
func (c *Cluster) Shutdown() error {
	c.shutdownOnce.Do(func() {
		close(c.stopCh)
		c.cancel()
		c.wg.Wait()
		if err := c.ml.Shutdown(); err != nil {
			c.shutdownErr = fmt.Errorf("cluster: shut down gossip: %w", err)
		}
	})
	return c.shutdownErr
}

// observe records a membership event and wakes the loop. gone is true
// for NotifyLeave: the member left if its instance announced so, and
// failed otherwise.
func (c *Cluster) observe(n *memberlist.Node, gone bool) {
	meta, err := decodeMeta(n.Meta)
	if err != nil || meta.ID != n.Name {
		c.logger.Warn("ignoring gossip member without lockd metadata", "name", n.Name, "addr", n.Address(), "error", err)
		return
	}
	m := &member{meta: meta, gossip: n.Address(), status: StatusAlive}
	c.mu.Lock()
	switch {
	case gone && c.leftGracefully(m):
		m.status = StatusLeft
	case gone:
		m.status = StatusDead
	case c.intents[meta.ID] != "" && !c.leftGracefully(m):
		delete(c.intents, meta.ID) // back with a new instance
	}
	c.members[meta.ID] = m
	c.mu.Unlock()
	c.logger.Debug("member", "id", meta.ID, "status", m.status, "raft", meta.Raft, "http", meta.HTTP)
	c.wakeLoop()
}

// numAlive counts the members gossip sees alive, for retransmit limits.
func (c *Cluster) numAlive() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, m := range c.members {
		if m.status == StatusAlive {
			n++
		}
	}
	return max(n, 1)
}

func (c *Cluster) wakeLoop() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// run bootstraps, keeps our metadata current and reconciles, on every
// membership change and periodically.
func (c *Cluster) run() {
	defer c.wg.Done()
	t := time.NewTicker(c.interval)
	defer t.Stop()
	// A new leader reconciles at once rather than at the next tick: until
	// it has, it does not know its voters' log format (LogFormat), and
	// writes the oldest (no session keys, no ACLs).
	lead := time.NewTicker(leaderPoll)
	defer lead.Stop()
	for wasLeader := false; ; {
		c.maybeBootstrap()
		c.refreshMeta()
		c.reconcile()
		for woken := false; !woken; {
			select {
			case <-c.stopCh:
				return
			case <-c.wake:
				woken = true
			case <-t.C:
				woken = true
			case <-lead.C:
				isLeader := c.node.Status().State == "leader"
				woken, wasLeader = isLeader && !wasLeader, isLeader
			}
		}
	}
}

// leaderPoll is how often run looks whether this node became the leader.
const leaderPoll = 100 * time.Millisecond

// refreshMeta republishes our metadata when the node gained raft state
// (bootstrapped, or added by a leader), so no one counts it as fresh.
func (c *Cluster) refreshMeta() {
	state := c.node.HasState()
	c.mu.Lock()
	changed := state != c.meta.State
	c.mu.Unlock()
	if changed {
		c.updateMeta(func(m *nodeMeta) { m.State = state })
	}
}

// updateMeta changes our metadata and gossips it.
func (c *Cluster) updateMeta(change func(*nodeMeta)) {
	c.mu.Lock()
	meta := c.meta
	change(&meta)
	b, err := meta.encode()
	if err == nil {
		c.meta, c.metaBytes = meta, b
	}
	c.mu.Unlock()
	if err != nil {
		c.logger.Error("cannot update node metadata", "error", err)
		return
	}
	if err := c.ml.UpdateNode(updateMetaTimeout); err != nil {
		c.logger.Debug("gossiping node metadata", "error", err)
	}
}

// retryJoin joins the given addresses until some node other than this one
// answers, so nodes may start in any order.
func (c *Cluster) retryJoin() {
	defer c.wg.Done()
	interval := c.cfg.RetryJoinInterval
	if interval <= 0 {
		interval = defaultRetryJoinInterval
	}
	for attempt := 1; ; attempt++ {
		n, err := c.ml.Join(c.cfg.Join)
		// Joining only ourselves (a join list naming this node) is no join.
		if n > 0 && c.ml.NumMembers() > 1 {
			c.logger.Info("joined the cluster", "contacted", n, "members", c.ml.NumMembers())
			return
		}
		if attempt == 1 || attempt%30 == 0 {
			c.logger.Warn("cannot join the cluster yet; retrying", "join", c.cfg.Join, "attempt", attempt, "error", err)
		}
		t := time.NewTimer(interval)
		select {
		case <-c.stopCh:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// reconnect periodically joins the members gossip considers failed.
func (c *Cluster) reconnect() {
	defer c.wg.Done()
	t := time.NewTicker(reconnectInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stopCh:
			return
		case <-t.C:
		}
		var addrs []string
		c.mu.Lock()
		for _, m := range c.members {
			if m.status == StatusDead {
				addrs = append(addrs, m.gossip)
			}
		}
		c.mu.Unlock()
		if len(addrs) == 0 || c.leaving.Load() {
			continue
		}
		if n, err := c.ml.Join(addrs); n > 0 {
			c.logger.Info("reconnected to failed members", "contacted", n)
		} else {
			c.logger.Debug("failed members still unreachable", "addrs", addrs, "error", err)
		}
	}
}

// Directory resolves node ids to HTTP addresses through a Cluster that is
// started after the raftnode that asks (raftnode.Config.PeerHTTP is set
// at Open): pass Directory.HTTPAddr as PeerHTTP, then Config.Directory (or
// Set) to Start. Until then it knows no one. The zero value is ready.
type Directory struct{ c atomic.Pointer[Cluster] }

// Set points the directory at a running cluster.
func (d *Directory) Set(c *Cluster) { d.c.Store(c) }

// HTTPAddr returns a node's HTTP address, or false if the cluster is not
// set yet or does not know the node.
func (d *Directory) HTTPAddr(id string) (string, bool) {
	c := d.c.Load()
	if c == nil {
		return "", false
	}
	return c.HTTPAddr(id)
}
