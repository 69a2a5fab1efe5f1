package raftnode

import (
	"crypto/tls"
	"fmt"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockd/lockd/raftnode/certs"
)

// Raft assumes its participants are honest, and a node certificate of the
// cluster's CA proves only that the CA signed a name: a decommissioned
// node's certificate, a spare's or a leaked one would otherwise send
// AppendEntries (entries the FSM must apply), RequestVote or
// InstallSnapshot and be obeyed. So raft's own RPCs, like the internal RPC
// (fromMember), are answered only for the servers of this node's latest
// raft configuration (the one raft uses, committed or not), with the
// exception a join needs:
//
//   - a node in no configuration yet (fresh, waiting to be bootstrapped
//     or added) accepts the peers of its join rule (Node.SetJoinRule:
//     with gossip, the members that have raft state, whose node
//     certificate names them), and nobody else;
//   - a member that knows no leader, or follows the peer as its leader,
//     accepts the join rule's peers too: a node replaced under its own id
//     replays the log from its start, and the configuration it holds
//     meanwhile may lack the current leader (a node that joined later),
//     which it must still hear until it reaches the entry that adds it.
//     (It follows only a leader whose RPCs it has accepted, so this
//     admits nobody the rule did not already.)
//
// The peer is checked when its connection is accepted and again whenever
// bytes arrive on it (before raft decodes them), so a member removed
// while its connection is open is refused from the moment this node has
// the configuration without it; heartbeats get no exception. Without TLS
// (--dev, --insecure) there are no names and everyone is answered.

// admitLogEvery bounds the log lines about refused raft peers: one per
// name per interval, however many connections they open.
const admitLogEvery = time.Minute

// SetJoinRule sets which peers, by the name in their node certificate, a
// node outside any configuration (or knowing no leader) answers raft
// RPCs from: the peers it asked to join through. nil (the default)
// admits nobody beyond the configuration.
func (n *Node) SetJoinRule(rule func(name string) bool) {
	if rule == nil {
		n.joinRule.Store(nil)
		return
	}
	n.joinRule.Store(&rule)
}

// admitsRaft reports whether the peer whose node certificate names name
// may speak raft to this node now.
func (n *Node) admitsRaft(name string) bool {
	r := n.raftUp.Load()
	if name == "" || r == nil {
		return false // raft not up yet: nothing to answer
	}
	future := r.GetConfiguration() // raft's cached latest configuration
	if future.Error() != nil {
		return false
	}
	servers := future.Configuration().Servers
	for _, s := range servers {
		if string(s.ID) == name {
			return true
		}
	}
	if len(servers) > 0 {
		if _, leader := r.LeaderWithID(); leader != "" && string(leader) != name {
			return false
		}
	}
	rule := n.joinRule.Load()
	return rule != nil && (*rule)(name)
}

// raftAdmission checks raft peers for a node port: admit is the rule,
// and refusals are logged at most once per name per admitLogEvery.
type raftAdmission struct {
	admit  func(name string) bool
	denied func(serial *big.Int) bool // the certificate deny list; nil: none
	log    func(name, when string)

	mu      sync.Mutex
	logged  map[string]time.Time
	refused atomic.Uint64
}

// refuse counts and logs a refused peer.
func (a *raftAdmission) refuse(name, when string) {
	a.refused.Add(1)
	now := time.Now()
	a.mu.Lock()
	last, seen := a.logged[name]
	logIt := !seen || now.Sub(last) >= admitLogEvery
	if logIt {
		if len(a.logged) >= 1024 {
			clear(a.logged) // names are chosen by whoever holds a certificate: bound the map
		}
		a.logged[name] = now
	}
	a.mu.Unlock()
	if logIt {
		a.log(name, when)
	}
}

// wrap returns conn as raft may read it, or an error if its peer is
// refused now.
func (a *raftAdmission) wrap(conn net.Conn) (net.Conn, error) {
	tc, ok := conn.(*tls.Conn)
	if a == nil || !ok {
		return conn, nil // plaintext: no names to check
	}
	cs := tc.ConnectionState()
	name, serial := certs.PeerName(cs), certs.PeerSerial(cs)
	if err := a.check(name, serial); err != nil {
		a.refuse(name, "connect")
		return nil, err
	}
	return &admittedConn{Conn: conn, name: name, serial: serial, admission: a}, nil
}

// check returns why the peer with this name and certificate serial may
// not speak raft now, or nil.
func (a *raftAdmission) check(name string, serial *big.Int) error {
	if a.denied != nil && a.denied(serial) {
		return fmt.Errorf("raftnode: the certificate of %q (serial %x) is on the deny list", name, serial)
	}
	if !a.admit(name) {
		return fmt.Errorf("raftnode: %q is not a server of the raft configuration", name)
	}
	return nil
}

// admittedConn is a raft connection whose peer is checked again whenever
// bytes arrive: a removed member's open connection, or one whose
// certificate was denied meanwhile, ends at its next RPC.
type admittedConn struct {
	net.Conn
	name      string
	serial    *big.Int
	admission *raftAdmission
}

// Read reads, then refuses what arrived (and closes the connection) if
// the peer is no longer admitted.
func (c *admittedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		if cerr := c.admission.check(c.name, c.serial); cerr != nil {
			c.admission.refuse(c.name, "rpc")
			c.Conn.Close()
			return 0, fmt.Errorf("%w: %w", cerr, net.ErrClosed)
		}
	}
	return n, err
}

// RaftRefusals returns how many raft connections and RPCs this node
// refused because their peer was not a server of its configuration.
func (n *Node) RaftRefusals() uint64 {
	if n.port == nil || n.port.admission == nil {
		return 0
	}
	return n.port.admission.refused.Load()
}

// newRaftAdmission returns the node port's admission for this node.
func (n *Node) newRaftAdmission() *raftAdmission {
	logger := n.logger.Named("raft-admit")
	return &raftAdmission{admit: n.admitsRaft, denied: n.CertDenied, logged: make(map[string]time.Time),
		log: func(name, when string) {
			logger.Warn("refused raft from a node certificate that is not a server of the raft configuration "+
				"or is on the deny list (further refusals of this name are not logged for a minute)", "name", name, "at", when)
		}}
}
