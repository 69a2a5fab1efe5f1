package api

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/raftnode/lockservice"
)

// Authentication (docs/security.md). With Config.ACL every request but
// the few that carry nothing (GET /v1/status, the dashboard's files, the
// one-time bootstrap) must present "Authorization: Bearer <secret>". The
// secret becomes the caller lockservice acts for; what the caller may do
// is decided there and in the table, against the state the request
// reads or the entry it writes.

// open reports whether r may come without a token.
func open(r *http.Request) bool {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/status":
	case r.Method == http.MethodGet && (r.URL.Path == "/ui" || strings.HasPrefix(r.URL.Path, "/ui/")):
	case r.Method == http.MethodPost && r.URL.Path == "/v1/acl/bootstrap":
	default:
		return false
	}
	return true
}

// certOperator reports whether r, without a token, asks an operator
// endpoint (leave, member removal, the certificate deny list) with a
// client certificate the TLS
// handshake verified against the cluster's CA, under
// Config.OperatorCert: such a request needs no token (docs/security.md,
// "Operator endpoints need an operator's certificate or a management token").
func (s *Server) certOperator(r *http.Request) bool {
	if !s.cfg.OperatorCert || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return false
	}
	return (r.Method == http.MethodPost && r.URL.Path == "/v1/agent/leave") ||
		(r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/members/")) ||
		((r.Method == http.MethodPost || r.Method == http.MethodGet) && r.URL.Path == "/v1/certs/denied")
}

// bearer returns the secret of an "Authorization: Bearer" header.
func bearer(r *http.Request) (secret string, ok bool, err error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false, nil
	}
	scheme, secret, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return "", false, errorf(wire.CodeUnauthorized, "the Authorization header must be \"Bearer <secret>\"")
	}
	return strings.TrimSpace(secret), true, nil
}

// authenticate puts the caller of r into its context. A token is checked
// whenever one is given, ACLs on or not; without one, all but open
// requests are refused while ACLs are on here or the cluster has been
// bootstrapped (a node started without --acl by mistake stays closed).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, has, err := bearer(r)
		switch {
		case err != nil:
			s.writeError(w, r, err)
			return
		case !has && s.certOperator(r):
			next.ServeHTTP(w, r) // mayOperate lets the certificate through
			return
		case !has && (s.cfg.ACL || s.locks.Bootstrapped()) && !open(r):
			s.writeError(w, r, errorf(wire.CodeUnauthorized,
				"a token is required: Authorization: Bearer <secret> (lockctl and the Go client read LOCKD_TOKEN)"))
			return
		case !has:
			next.ServeHTTP(w, r)
			return
		}
		caller, err := s.locks.Authenticate(r.Context(), secret)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(lockservice.WithCaller(r.Context(), caller)))
	})
}

// callerID is the id of the token r acts with, "" for none.
func callerID(r *http.Request) string { return lockservice.CallerOf(r.Context()).TokenID }

// aclMetrics counts denials (revokes are counted by the table, as
// lockd_revoked_holds_total).
type aclMetrics struct {
	denials *prometheus.CounterVec
}

func newACLMetrics(reg prometheus.Registerer) (*aclMetrics, error) {
	m := &aclMetrics{
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockd_acl_denials_total",
			Help: "Requests refused for their token: unauthorized (none, unknown or deleted) or forbidden (no right).",
		}, []string{"code"}),
	}
	if err := reg.Register(m.denials); err != nil {
		return nil, err
	}
	m.denials.WithLabelValues(wire.CodeUnauthorized)
	m.denials.WithLabelValues(wire.CodeForbidden)
	return m, nil
}

// denied counts a refusal for the caller's token and logs it: its id,
// never its secret, in at most one line per token id (or per anonymous
// caller) per denialLogEvery, which says how many were denied since the
// last line. The counter in /metrics counts every one.
func (s *Server) denied(r *http.Request, e *Error) {
	if e.Code != wire.CodeUnauthorized && e.Code != wire.CodeForbidden {
		return
	}
	s.acl.denials.WithLabelValues(e.Code).Inc()
	id := callerID(r)
	if n, ok := s.denialLog.take(id, time.Now()); ok {
		s.log.Warn("request denied", "method", r.Method, "path", r.URL.Path, "code", e.Code,
			"token_id", id, "remote", r.RemoteAddr, "reason", e.Message, "denied_since_last_line", n)
	}
}

// denialLogEvery is how often a token's denials are logged at most.
const denialLogEvery = time.Minute

// maxDenialKeys bounds the token ids denialLimiter remembers; past it, it
// forgets them all (and logs each one's next denial).
const maxDenialKeys = 4096

// denialLimiter rate-limits the log of denials per token id.
type denialLimiter struct {
	mu   sync.Mutex
	byID map[string]*denialLine
}

type denialLine struct {
	last  time.Time
	count int // denials since last was logged, this one included
}

// take records a denial of id at now and reports whether to log it, with
// how many denials of id the line stands for.
func (d *denialLimiter) take(id string, now time.Time) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byID == nil || len(d.byID) >= maxDenialKeys {
		d.byID = make(map[string]*denialLine)
	}
	l := d.byID[id]
	if l == nil {
		l = &denialLine{}
		d.byID[id] = l
	}
	l.count++
	if !l.last.IsZero() && now.Sub(l.last) < denialLogEvery {
		return 0, false
	}
	n := l.count
	l.last, l.count = now, 0
	return n, true
}
