package raftnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/raftnode/certs"
)

// One node port carries everything nodes say to each other (Consul's
// server port): raft's own protocol and the internal RPC (forwarded
// proposals, read-index, keepalives, membership calls). With TLS every
// connection is mutual TLS 1.3 and only a node certificate signed by the
// cluster's CA gets in; then, as without TLS, its first byte names the
// protocol. The internal RPC is therefore reachable only from other nodes,
// never from the client port.
const (
	protoRaft     byte = 0x01
	protoInternal byte = 0x02

	transportMaxPool = 3
	transportTimeout = 10 * time.Second
	// handshakeTimeout bounds the TLS handshake and the protocol byte of
	// an accepted connection, so a silent stranger holds nothing for long.
	handshakeTimeout = 5 * time.Second
	// maxPendingConns bounds accepted connections still in their
	// handshake, and maxPendingPerHost those from one address, so that
	// one host idling connections cannot keep the other nodes out.
	maxPendingConns   = 256
	maxPendingPerHost = 64
)

// nodePort is the listener of the node port and the dialer of other
// nodes' ports.
type nodePort struct {
	listener  net.Listener
	advertise net.Addr
	serverTLS *tls.Config // nil: plaintext (dev, or --insecure)
	clientTLS *tls.Config
	raft      *connQueue
	internal  *connQueue
	admission *raftAdmission // nil: every raft peer the TLS handshake accepted
	pending   chan struct{}  // a slot per connection in its handshake
	perHost   sync.Mutex
	byHost    map[string]int // connections in their handshake, by remote IP
	done      chan struct{}
	closeOnce sync.Once
}

func listenNodePort(bind string, advertise net.Addr, serverTLS, clientTLS *tls.Config, admission *raftAdmission) (*nodePort, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if tcp, ok := advertise.(*net.TCPAddr); !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%v is not an address other nodes can dial: set the advertised raft address", advertise)
	}
	p := &nodePort{listener: ln, advertise: advertise, serverTLS: serverTLS, clientTLS: clientTLS, admission: admission,
		pending: make(chan struct{}, maxPendingConns), byHost: make(map[string]int), done: make(chan struct{})}
	p.raft = newConnQueue(p)
	p.internal = newConnQueue(p)
	go p.acceptLoop()
	return p, nil
}

func (p *nodePort) acceptLoop() {
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			p.close()
			return
		}
		host := remoteHost(conn)
		if !p.admit(host) {
			conn.Close() // too many in their handshake at once, in all or from this host
			continue
		}
		go p.route(conn, host)
	}
}

// admit takes a handshake slot for a connection from host, if there is
// one; route gives it back.
func (p *nodePort) admit(host string) bool {
	p.perHost.Lock()
	defer p.perHost.Unlock()
	if p.byHost[host] >= maxPendingPerHost {
		return false
	}
	select {
	case p.pending <- struct{}{}:
		p.byHost[host]++
		return true
	default:
		return false
	}
}

func (p *nodePort) release(host string) {
	p.perHost.Lock()
	defer p.perHost.Unlock()
	<-p.pending
	if p.byHost[host]--; p.byHost[host] <= 0 {
		delete(p.byHost, host)
	}
}

func remoteHost(conn net.Conn) string {
	if tcp, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return conn.RemoteAddr().String()
}

// route authenticates an accepted connection and hands it to the
// protocol its first byte names.
func (p *nodePort) route(conn net.Conn, host string) {
	defer p.release(host)
	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	if p.serverTLS != nil {
		tc := tls.Server(conn, p.serverTLS)
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return
		}
		conn = tc
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	switch b[0] {
	case protoRaft:
		admitted, err := p.admission.wrap(conn)
		if err != nil {
			conn.Close()
			return
		}
		p.raft.push(admitted)
	case protoInternal:
		p.internal.push(conn)
	default:
		conn.Close()
	}
}

// dial connects to another node's port for protocol proto.
func (p *nodePort) dial(ctx context.Context, addr string, proto byte) (net.Conn, error) {
	conn, err := p.dialTLS(ctx, addr)
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetWriteDeadline(deadline)
	}
	if _, err := conn.Write([]byte{proto}); err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

// dialTLS connects to addr and, with TLS, completes the handshake.
func (p *nodePort) dialTLS(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: transportTimeout, KeepAlive: 30 * time.Second}
	if p.clientTLS == nil {
		return d.DialContext(ctx, "tcp", addr)
	}
	return (&tls.Dialer{NetDialer: &d, Config: p.clientTLS}).DialContext(ctx, "tcp", addr)
}

func (p *nodePort) close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.done)
		err = p.listener.Close()
	})
	return err
}

// connQueue is a net.Listener fed by route with the connections of one
// protocol.
type connQueue struct {
	port  *nodePort
	conns chan net.Conn
}

func newConnQueue(p *nodePort) *connQueue {
	return &connQueue{port: p, conns: make(chan net.Conn, 16)}
}

func (q *connQueue) push(conn net.Conn) {
	select {
	case q.conns <- conn:
	case <-q.port.done:
		conn.Close()
	}
}

// Accept returns the next connection of the queue's protocol.
func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case conn := <-q.conns:
		return conn, nil
	case <-q.port.done:
		return nil, net.ErrClosed
	}
}

// Close closes the whole port.
func (q *connQueue) Close() error { return q.port.close() }

// Addr returns the port's advertised address.
func (q *connQueue) Addr() net.Addr { return q.port.advertise }

// raftLayer is raft's StreamLayer on the node port.
type raftLayer struct{ *connQueue }

// Dial connects to another node's raft.
func (l raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return l.port.dial(ctx, string(address), protoRaft)
}

// openTransport opens the node port: raft's NetworkTransport on it, and
// the internal RPC server beside it.
func (n *Node) openTransport() error {
	// Without RaftAdvertise the port advertises what it bound, which also
	// resolves port 0.
	var advertise net.Addr
	if n.cfg.RaftAdvertise != "" {
		addr, err := net.ResolveTCPAddr("tcp", n.cfg.RaftAdvertise)
		if err != nil {
			return fmt.Errorf("raftnode: raft advertise address %q: %w", n.cfg.RaftAdvertise, err)
		}
		advertise = addr
	}
	port, err := listenNodePort(n.cfg.RaftBind, advertise, n.cfg.PeerServerTLS, n.cfg.PeerClientTLS, n.newRaftAdmission())
	if err != nil {
		return fmt.Errorf("raftnode: node port on %s: %w", n.cfg.RaftBind, err)
	}
	n.port = port
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  raftLayer{port.raft},
		MaxPool: transportMaxPool,
		Timeout: transportTimeout,
		Logger:  n.logger.Named("raft-net"),
	})
	n.internal = &http.Server{Handler: n.newHandler(), ReadHeaderTimeout: handshakeTimeout,
		IdleTimeout: 2 * time.Minute, ErrorLog: n.logger.Named("internal").StandardLogger(nil),
		ConnContext: withPeerName}
	go func() { _ = n.internal.Serve(port.internal) }()
	return nil
}

// newForwardClient returns a client a node forwards with: up to conns
// keep-alive connections per peer over the node port. The URL's host is the peer's raft address; TLS,
// when on, is the port's, below HTTP.
func (n *Node) newForwardClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: nil, // internal traffic never goes through a proxy
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return n.port.dial(ctx, addr, protoInternal)
		},
		// A burst of calls waits for one of conns connections instead of
		// dialling one each: the leader closes connections over
		// maxPendingPerHost in their handshake from one host, and a call
		// whose connection is closed after it was written has an unknown
		// outcome (TestForwardBurst).
		MaxConnsPerHost:     conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// VerifyPeer dials a node's port and checks that it presents a node
// certificate that names id: the leader's test before making a gossip
// member a voter. Without TLS there is nothing to verify and it returns
// nil.
func (n *Node) VerifyPeer(ctx context.Context, id, raftAddr string) error {
	if n.cfg.PeerClientTLS == nil {
		return nil
	}
	conn, err := n.port.dialTLS(ctx, raftAddr)
	if err != nil {
		return fmt.Errorf("raftnode: verify %s at %s: %w", id, raftAddr, err)
	}
	defer conn.Close()
	// The handshake checked that it is a node certificate of our CA.
	if name := certs.PeerName(conn.(*tls.Conn).ConnectionState()); name != id {
		return fmt.Errorf("raftnode: verify %s at %s: its node certificate names %q", id, raftAddr, name)
	}
	return nil
}

// peerNameKey keys the node certificate a connection to the internal RPC
// presented: its name and serial (a peerCert).
type peerNameKey struct{}

// peerCert is who a connection to the internal RPC is.
type peerCert struct {
	name   string
	serial *big.Int
}

// withPeerName records, for the internal RPC's handlers, whose node
// certificate the connection presented (TLS ends below HTTP here, so
// http.Request.TLS is not set).
func withPeerName(ctx context.Context, conn net.Conn) context.Context {
	if tc, ok := conn.(*tls.Conn); ok {
		cs := tc.ConnectionState()
		return context.WithValue(ctx, peerNameKey{}, peerCert{name: certs.PeerName(cs), serial: certs.PeerSerial(cs)})
	}
	return ctx
}

// fromMember answers an internal call only from a node of the raft
// configuration: a node certificate of the CA is not enough, or a
// decommissioned node's certificate could still remove voters or propose.
// Without TLS (--dev, --insecure) there is no name to check.
func (n *Node) fromMember(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.cfg.PeerServerTLS == nil {
			next.ServeHTTP(w, r)
			return
		}
		peer, _ := r.Context().Value(peerNameKey{}).(peerCert)
		name := peer.name
		if n.CertDenied(peer.serial) {
			writeReply(w, http.StatusForbidden, wireReply{Code: codeNotMember,
				Message: fmt.Sprintf("the certificate of %q (serial %x) is on the deny list", name, peer.serial)})
			return
		}
		if !n.isServer(name) {
			writeReply(w, http.StatusForbidden, wireReply{Code: codeNotMember,
				Message: fmt.Sprintf("%q is not a server of this cluster's raft configuration", name)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isServer reports whether id is in the raft configuration.
func (n *Node) isServer(id string) bool {
	future := n.raft.GetConfiguration() // served from raft's cached configuration
	if id == "" || future.Error() != nil {
		return false
	}
	for _, s := range future.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}
