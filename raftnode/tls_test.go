package raftnode

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode/certs"
)

// testPKI issues certificates for a test, from one CA.
type testPKI struct {
	t  *testing.T
	ca *certs.Authority
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := certs.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{t: t, ca: ca}
}

// files writes the CA and a certificate (a node's, or with client a
// client's) into a temporary directory.
func (p *testPKI) files(name string, client bool) certs.Files {
	p.t.Helper()
	dir := p.t.TempDir()
	if err := p.ca.WriteFiles(dir); err != nil {
		p.t.Fatal(err)
	}
	cert, key, err := p.ca.Node(name, nil, nil)
	if client {
		cert, key, err = p.ca.Client(name)
	}
	if err == nil {
		err = certs.WriteKeyPair(dir, name, cert, key)
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return certs.Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, name+".pem"),
		Key: filepath.Join(dir, name+"-key.pem")}
}

// store loads a node's identity.
func (p *testPKI) store(name string) *certs.Store {
	p.t.Helper()
	s, err := certs.Load(p.files(name, false))
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// useTLS makes every node of a test cluster use a node certificate named
// by its id.
func (p *testPKI) useTLS(cfg *Config) {
	s := p.store(cfg.ID)
	cfg.PeerServerTLS, cfg.PeerClientTLS = s.PeerServer(), s.PeerClient()
}

func TestClusterOverMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	c := newTestCluster(t, 3, pki.useTLS)
	l := c.leader()
	f := c.followers(l)[0]
	res, _, err := f.get().Propose(context.Background(), &lockstate.CreateSession{TTL: time.Minute})
	if err != nil || res.Err != nil {
		t.Fatalf("proposal forwarded over TLS: %+v, %v", res, err)
	}
	ctx := context.Background()
	if err := l.get().VerifyPeer(ctx, f.id, f.raftAddr); err != nil {
		t.Fatalf("VerifyPeer of %s: %v", f.id, err)
	}
	if err := l.get().VerifyPeer(ctx, "evil1", f.raftAddr); err == nil {
		t.Fatalf("VerifyPeer accepted %s's certificate for the id evil1", f.id)
	}
	for _, tn := range c.live() { // members and the join rule: nobody of the cluster was refused
		if got := tn.get().RaftRefusals(); got != 0 {
			t.Errorf("%s refused raft %d times", tn.id, got)
		}
	}
}

// A stranger's AppendEntries, RequestVote and TimeoutNow never reach raft:
// without TLS, with a client certificate of the cluster's CA, with no
// certificate, or with a node certificate of another CA. An AppendEntries
// with a member's node certificate is answered, so the
// refusals are the TLS checks'.
func TestStrangerCannotSpeakRaft(t *testing.T) {
	pki := newTestPKI(t)
	c := newTestCluster(t, 3, pki.useTLS)
	l := c.leader()
	target := c.followers(l)[0]
	term := target.get().Status().Term
	last := target.get().raft.LastIndex()

	other := newTestPKI(t)
	clientCert := pki.files("ops", true)
	clientTLS, err := certs.ClientConfig(clientCert.CA, clientCert.Cert, clientCert.Key)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS.InsecureSkipVerify = true // the stranger does not care who answers
	strangers := map[string]*tls.Config{
		"plaintext":             nil,
		"client certificate":    clientTLS,
		"another CA's node":     other.store(target.id).PeerClient(),
		"no client certificate": {MinVersion: tls.VersionTLS13, InsecureSkipVerify: true},
	}
	// The strangers ask at a term no election of this test reaches: under
	// load the cluster may hold one meanwhile, which moves the term too.
	strange := term + 1000
	for name, conf := range strangers {
		if err := strangerRaftCalls(target, conf, strange); err == nil {
			t.Errorf("%s: a stranger's raft calls were answered", name)
		}
	}
	if got := target.get().Status().Term; got >= strange {
		t.Fatalf("strangers moved %s's term from %d to %d", target.id, term, got)
	}
	if got := target.get().raft.LastIndex(); got < last {
		t.Fatalf("log of %s went from %d back to %d", target.id, last, got)
	}
	// Control: a member's certificate gets answers.
	if err := memberAppend(target, pki.store(l.id).PeerClient()); err != nil {
		t.Fatalf("a node certificate of the cluster's CA was refused: %v", err)
	}
}

// strangerRaftCalls sends AppendEntries, RequestVote and TimeoutNow at
// term over the node port, with conf for TLS (nil: plaintext). It returns
// nil if any of them was answered.
func strangerRaftCalls(target *testNode, conf *tls.Config, term uint64) error {
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &dialOnly{conf: conf, closed: make(chan struct{})}, MaxPool: 1, Timeout: 2 * time.Second})
	defer trans.Close()
	id, addr := raft.ServerID(target.id), raft.ServerAddress(target.raftAddr)
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte("evil")}
	appendErr := trans.AppendEntries(id, addr, &raft.AppendEntriesRequest{RPCHeader: header, Term: term},
		new(raft.AppendEntriesResponse))
	voteErr := trans.RequestVote(id, addr, &raft.RequestVoteRequest{RPCHeader: header, Term: term},
		new(raft.RequestVoteResponse))
	timeoutErr := trans.TimeoutNow(id, addr, &raft.TimeoutNowRequest{RPCHeader: header}, new(raft.TimeoutNowResponse))
	if appendErr == nil || voteErr == nil || timeoutErr == nil {
		return nil
	}
	return appendErr
}

// memberAppend sends a harmless AppendEntries (term 0, stale) with conf.
func memberAppend(target *testNode, conf *tls.Config) error {
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &dialOnly{conf: conf, closed: make(chan struct{})}, MaxPool: 1, Timeout: 2 * time.Second})
	defer trans.Close()
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n9"), Addr: []byte("n9")}
	return trans.AppendEntries(raft.ServerID(target.id), raft.ServerAddress(target.raftAddr),
		&raft.AppendEntriesRequest{RPCHeader: header}, new(raft.AppendEntriesResponse))
}

// dialOnly is a StreamLayer that only dials: the stranger's side.
type dialOnly struct {
	conf   *tls.Config
	closed chan struct{}
}

func (d *dialOnly) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	if d.conf != nil {
		tc := tls.Client(conn, d.conf)
		_ = tc.SetDeadline(time.Now().Add(timeout))
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	_, err = conn.Write([]byte{protoRaft})
	return conn, err
}

func (d *dialOnly) Accept() (net.Conn, error) { <-d.closed; return nil, net.ErrClosed }
func (d *dialOnly) Close() error              { close(d.closed); return nil }
func (d *dialOnly) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// The internal RPC answers only servers of the raft configuration: a node
// certificate of the CA for a node that is not (or no longer) a member
// cannot remove a voter or propose; a member's forward works.
func TestInternalRPCAnswersOnlyMembers(t *testing.T) {
	pki := newTestPKI(t)
	c := newTestCluster(t, 3, pki.useTLS)
	l := c.leader()
	victim := c.followers(l)[0]

	outsider := &Node{cfg: Config{ID: "n9"}, timing: l.get().timing}
	outsider.port = &nodePort{clientTLS: pki.store("n9").PeerClient()}
	outsider.client = outsider.newForwardClient(forwardConns)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Refused as "not (yet) a member": nothing done, so a joining node
	// asks again until the leader has added it (a fresh replacement in
	// the jepsen membership nemesis answered 500 before this).
	if err := outsider.forwardRemove(ctx, l.raftAddr, victim.id, false); !errors.Is(err, errRetry) {
		t.Fatalf("a non-member's certificate removing a voter: %v, want a refusal to retry", err)
	}
	if _, _, err := outsider.forwardPropose(ctx, l.raftAddr, &lockstate.CreateSession{TTL: time.Minute}); !errors.Is(err, errRetry) {
		t.Fatalf("a non-member's certificate proposing: %v, want a refusal to retry", err)
	}
	if servers, _ := l.get().Servers(); len(servers) != 3 {
		t.Fatalf("servers after the outsider's calls: %v", servers)
	}
	if _, _, err := victim.get().Propose(ctx, &lockstate.CreateSession{TTL: time.Minute}); err != nil {
		t.Fatalf("a member's forwarded proposal: %v", err)
	}
}

// One host that opens many connections and sends nothing holds at most
// maxPendingPerHost handshake slots: a node on another address still gets
// in. (Loopback gives the attacker its own address: 127.0.0.2.)
func TestIdleHostCannotFillTheHandshakeSlots(t *testing.T) {
	pki := newTestPKI(t)
	srv := pki.store("n1")
	port, err := listenNodePort("127.0.0.1:0", nil, srv.PeerServer(), srv.PeerClient(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer port.close()
	go func() { // a consumer that keeps what it accepts, as raft would
		var accepted []net.Conn
		defer func() {
			for _, c := range accepted {
				c.Close()
			}
		}()
		for {
			c, err := port.raft.Accept()
			if err != nil {
				return
			}
			accepted = append(accepted, c)
		}
	}()
	addr := port.listener.Addr().String()
	attacker := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range maxPendingConns + 8 {
		c, err := attacker.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	time.Sleep(200 * time.Millisecond) // let the accept loop take them all
	node := &nodePort{clientTLS: pki.store("n2").PeerClient()}
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := node.dial(ctx, addr, protoRaft)
		cancel()
		if err != nil {
			t.Fatalf("dial %d of a node during the flood: %v", i, err)
		}
		// TLS 1.3 reports a refused client late: read to see the port's verdict.
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("dial %d of a node during the flood was cut: %v", i, err)
		}
		c.Close()
	}
}
