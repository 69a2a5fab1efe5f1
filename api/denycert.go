package api

import (
	"context"
	"net/http"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// The certificate deny list (docs/security.md): POST /v1/certs/denied
// denies a serial on every node, GET /v1/certs/denied lists them. Both are
// operator endpoints (mayOperate): a management token, or an operator's
// certificate, with which the command is proposed without a token.

// POST /v1/certs/denied
func (s *Server) denyCert(w http.ResponseWriter, r *http.Request) {
	var req wire.DenyCertRequest
	if err := s.decode(w, r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkText("reason", req.Reason); err != nil {
		s.writeError(w, r, err)
		return
	}
	serial, err := s.locks.DenyCert(operatorContext(r), req.Serial, req.Reason)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.Warn("certificate denied", "serial", serial, "reason", req.Reason, "by", callerID(r))
	writeJSON(w, http.StatusOK, wire.DenyCertResponse{Denied: serial})
}

// GET /v1/certs/denied
func (s *Server) listDeniedCerts(w http.ResponseWriter, r *http.Request) {
	denied, err := s.locks.DeniedCerts(operatorContext(r), consistency(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]wire.DeniedCert, len(denied))
	for i, d := range denied {
		out[i] = wire.DeniedCert{Serial: d.Serial, Reason: d.Reason, Index: d.Index}
	}
	writeJSON(w, http.StatusOK, out)
}

// operatorContext is r's context, marking a caller without a token, whom
// mayOperate let through on an operator's certificate, as the operator.
func operatorContext(r *http.Request) context.Context {
	ctx := r.Context()
	if callerID(r) == "" && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		ctx = lockservice.WithCaller(ctx, lockservice.Caller{Operator: true})
	}
	return ctx
}

// refuseDenied answers 403 to a request whose client certificate is on
// the deny list and closes its connection: a certificate denied after
// the connection's handshake (which checks the list too) stops there.
func (s *Server) refuseDenied(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || !s.locks.CertDenied(r.TLS.PeerCertificates[0].SerialNumber) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		s.writeError(w, r, errorf(wire.CodeForbidden,
			"the client certificate (serial %x) is on the cluster's deny list", r.TLS.PeerCertificates[0].SerialNumber))
	})
}
