package api

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"slices"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/lockstate"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// The ACL endpoints (docs/api.md): bootstrap, tokens, revoke. What a token
// may do is the table's to decide (lockstate/acl.go); these handlers only
// translate.

func tokenJSON(ti lockstate.TokenInfo, secret string) wire.Token {
	t := wire.Token{ID: ti.ID, Secret: secret, Name: ti.Name, Rules: make([]wire.Rule, len(ti.Rules))}
	if ti.Limits != nil {
		t.Limits = &wire.TokenLimits{Sessions: ti.Limits.Sessions, Waiters: ti.Limits.Waiters}
	}
	for i, r := range ti.Rules {
		t.Rules[i] = wire.Rule{Prefix: r.Prefix, Access: string(r.Access)}
	}
	return t
}

// POST /v1/acl/bootstrap: the first management token, once per cluster.
func (s *Server) bootstrapACL(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.ACL {
		s.writeError(w, r, errorf(wire.CodeForbidden, "ACLs are off on this node: start every node with --acl"))
		return
	}
	tok, err := s.locks.Bootstrap(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("ACLs bootstrapped", "token_id", tok.ID, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, tokenJSON(tok.TokenInfo, tok.Secret))
}

// POST /v1/acl/tokens
func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateTokenRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkText("token name", req.Name); err != nil {
		s.writeError(w, r, err)
		return
	}
	rules := make([]lockstate.Rule, len(req.Rules))
	for i, rule := range req.Rules {
		rules[i] = lockstate.Rule{Prefix: rule.Prefix, Access: lockstate.Access(rule.Access)}
	}
	var limits *lockstate.TokenLimits
	if req.Limits != nil {
		limits = &lockstate.TokenLimits{Sessions: req.Limits.Sessions, Waiters: req.Limits.Waiters}
	}
	tok, err := s.locks.CreateToken(r.Context(), req.Name, rules, limits)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("token created", "token_id", tok.ID, "name", tok.Name, "by", callerID(r))
	writeJSON(w, http.StatusCreated, tokenJSON(tok.TokenInfo, tok.Secret))
}

// GET /v1/acl/tokens
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	toks, err := s.locks.Tokens(r.Context(), consistency(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]wire.Token, len(toks))
	for i, ti := range toks {
		out[i] = tokenJSON(ti, "")
	}
	writeJSON(w, http.StatusOK, out)
}

// DELETE /v1/acl/tokens/{id}
func (s *Server) deleteToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.locks.DeleteToken(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Info("token deleted", "token_id", id, "by", callerID(r))
	writeJSON(w, http.StatusOK, map[string]string{"deleted": id})
}

// POST /v1/revoke: every hold on a name released at once (admin).
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	var req wire.RevokeRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkLockName(req.Name); err != nil {
		s.writeError(w, r, err)
		return
	}
	revoked, err := s.locks.Revoke(r.Context(), req.Name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := wire.RevokeResponse{Revoked: make([]wire.RevokedHold, len(revoked))}
	for i, rv := range revoked {
		out.Revoked[i] = wire.RevokedHold{Name: rv.Name, Token: rv.Token}
		if rv.Visible {
			out.Revoked[i].Session = rv.Session // else "": another token's
		}
		s.log.Warn("hold revoked", "name", rv.Name, "session", rv.Session, "token", rv.Token, "by", callerID(r))
	}
	writeJSON(w, http.StatusOK, out)
}

// mayOperate lets through a request that may change the cluster itself
// (leave, member removal): one with an operator's certificate when
// Config.OperatorCert (see operatorCert), or one with a management token;
// with neither safeguard configured, anyone (--dev).
func (s *Server) mayOperate(r *http.Request) error {
	if s.cfg.OperatorCert && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		if err := s.operatorCert(r.TLS.PeerCertificates[0]); err == nil || callerID(r) == "" {
			return err
		}
	}
	if callerID(r) != "" || s.cfg.ACL {
		return s.locks.RequireAdmin(r.Context())
	}
	if s.cfg.OperatorCert {
		return errorf(wire.CodeUnauthorized,
			"%s %s changes the cluster: present a client certificate signed by the cluster's CA (lockd tls cert --client) or a management token",
			r.Method, r.URL.Path)
	}
	return nil
}

// operatorCert accepts the certificate of an operator: a client-only
// certificate of the CA (lockd tls cert --client), or the node
// certificate of a server of the raft configuration (a node acting on
// the cluster, as lockd leave on it does). A node certificate of the CA
// for a name that is not a member (a decommissioned node's, a spare's) is
// refused: it proves only that the CA signed the name. The TLS listener
// has verified the chain already.
func (s *Server) operatorCert(leaf *x509.Certificate) error {
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return nil // client-only: an operator's
	}
	name := leaf.Subject.CommonName
	servers, err := s.node.Servers()
	if err != nil {
		return fmt.Errorf("operator certificate of %q: %w", name, err)
	}
	if slices.ContainsFunc(servers, func(sv lockservice.Server) bool { return sv.ID == name }) {
		return nil
	}
	return errorf(wire.CodeForbidden,
		"the node certificate of %q is not a server of the raft configuration: it cannot change the cluster "+
			"(use an operator's client certificate, lockd tls cert --client, or a management token)", name)
}
