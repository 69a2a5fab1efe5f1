package raftnode

import (
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode/certs"
)

// serialOfFiles reads the serial of the certificate in f.
func serialOfFiles(t *testing.T, f certs.Files) *big.Int {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber
}

// A member's node certificate whose serial is denied is refused on the
// node port: its connection that was open before the denial at its next
// RPC, a new connection at the TLS handshake (before raft's admission
// sees it). Another certificate for the same name, not denied, is
// answered, and the cluster goes on.
func TestDeniedNodeCertificateIsRefused(t *testing.T) {
	pki := newTestPKI(t)
	var mu sync.Mutex
	stores := map[string]*certs.Store{}
	c := newTestCluster(t, 3, func(cfg *Config) {
		s := pki.store(cfg.ID)
		mu.Lock()
		stores[cfg.ID] = s
		mu.Unlock()
		cfg.PeerServerTLS, cfg.PeerClientTLS = s.PeerServer(), s.PeerClient()
	})
	l := c.leader()
	for _, tn := range c.live() { // as lockd does once its node is open
		mu.Lock()
		stores[tn.id].SetDenied(tn.get().CertDenied)
		mu.Unlock()
	}
	target := c.followers(l)[0]
	leakedFiles := pki.files(l.id, false) // a second certificate of the leader's name
	leaked, err := certs.Load(leakedFiles)
	if err != nil {
		t.Fatal(err)
	}
	kept := pki.store(l.id) // a third, never denied

	open := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &dialOnly{conf: leaked.PeerClient(), closed: make(chan struct{})}, MaxPool: 1, Timeout: 3 * time.Second})
	defer open.Close()
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(l.id), Addr: []byte(l.id)}
	stale := func() error { // term 0: raft answers and changes nothing
		return open.AppendEntries(raft.ServerID(target.id), raft.ServerAddress(target.raftAddr),
			&raft.AppendEntriesRequest{RPCHeader: header}, new(raft.AppendEntriesResponse))
	}
	if err := stale(); err != nil {
		t.Fatalf("the certificate before its denial: %v", err)
	}

	propose(t, l.get(), &lockstate.DenyCert{Serial: serialOfFiles(t, leakedFiles).Text(16), Reason: "leaked"})
	c.converged()
	refused := target.get().RaftRefusals()
	if err := stale(); err == nil {
		t.Fatal("the denied certificate's open connection was still answered")
	}
	if got := target.get().RaftRefusals(); got <= refused {
		t.Fatalf("refusals went from %d to %d on the open connection", refused, got)
	}
	refused = target.get().RaftRefusals()
	if err := memberAppend(target, leaked.PeerClient()); err == nil {
		t.Fatal("the denied certificate's new connection was answered")
	}
	if got := target.get().RaftRefusals(); got != refused {
		t.Fatalf("the new connection got past the handshake (refusals %d to %d): the TLS config did not check the deny list", refused, got)
	}
	if err := memberAppend(target, kept.PeerClient()); err != nil {
		t.Fatalf("an undenied certificate of the same name was refused: %v", err)
	}
	createSession(t, c.leader().get(), time.Minute)
	c.converged()
}
