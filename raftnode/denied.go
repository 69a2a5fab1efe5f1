package raftnode

import "math/big"

// CertDenied reports whether a certificate serial is on the deny list of
// this node's applied table (lockstate.DenyCert), without a lock
// (fsm.FSM.CertDenied). The TLS configs of every port ask it at each
// handshake (certs.Store.SetDenied), and the node port asks it again
// whenever bytes arrive on an admitted raft connection and for each
// internal call, so a denial applied here ends open connections too.
func (n *Node) CertDenied(serial *big.Int) bool {
	return n.fsm != nil && n.fsm.CertDenied(serial)
}
