package lockservice

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/lockd/lockd/lockstate"
)

// ACL tokens (docs/security.md). The table holds the tokens and checks
// every command against the token it carries (lockstate/acl.go); this
// file is the node's side: it turns a client's secret into the token id
// the commands carry, and checks reads against the table as it stands
// after the read's own read-index, so that a token deleted before a read
// began is refused on every node.

// Caller is who a call acts for: the token a client presented, or nobody.
// The service finds it in the call's context (WithCaller). While
// Config.ACL is off nobody may do everything, as before ACLs.
type Caller struct {
	TokenID string
	// Operator: the API let the call through, without a token, on an
	// operator's certificate (api mayOperate). Only a command that accepts
	// an operator (ForOperator) is then proposed without a token.
	Operator bool
}

type callerKey struct{}

// WithCaller returns ctx carrying the caller the service's calls act for.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// HashSecret is how a token's secret is stored: hex SHA-256. Secrets are
// 256 random bits, so a plain hash cannot be searched backwards.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Authenticate returns the caller a secret belongs to. A token this node
// does not know yet (created through another node a moment ago) is looked
// for again after a read-index.
func (s *Service) Authenticate(ctx context.Context, secret string) (Caller, error) {
	hash := HashSecret(secret)
	lookup := func() (tok lockstate.TokenInfo, ok bool) {
		s.fsm.Read(func(t *lockstate.Table) { tok, ok = t.TokenByHash(hash) })
		return tok, ok
	}
	tok, ok := lookup()
	if !ok {
		if err := s.catchUp(ctx, Linearizable); err != nil {
			return Caller{}, err
		}
		if tok, ok = lookup(); !ok {
			return Caller{}, refusal(lockstate.CodeUnauthorized, "the token is not valid (unknown or deleted)")
		}
	}
	return Caller{TokenID: tok.ID}, nil
}

// caller returns the token a call acts for, as the table has it now: nil
// while ACLs are off and nobody called, an unauthorized refusal for a
// caller whose token is gone or for nobody while ACLs are on. Call it
// inside fsm.Read, after the read's catchUp.
func (s *Service) caller(ctx context.Context, t *lockstate.Table) (*lockstate.TokenInfo, error) {
	c := callerOf(ctx)
	if c.TokenID == "" {
		if s.cfg.ACL || t.ACLBootstrapped() {
			return nil, refusal(lockstate.CodeUnauthorized, "a token is required (Authorization: Bearer <secret>)")
		}
		return nil, nil
	}
	tok, ok := t.Token(c.TokenID)
	if !ok {
		return nil, refusal(lockstate.CodeUnauthorized, "the token is not valid (unknown or deleted)")
	}
	return &tok, nil
}

// readAs runs fn under the table's read lock with the caller's token (nil
// with ACLs off), refusing a caller without a valid one. Call it after the
// read's catchUp: the token is checked against the same table as the read.
func (s *Service) readAs(ctx context.Context, fn func(t *lockstate.Table, tok *lockstate.TokenInfo) error) error {
	var err error
	s.fsm.Read(func(t *lockstate.Table) {
		var tok *lockstate.TokenInfo
		if tok, err = s.caller(ctx, t); err == nil {
			err = fn(t, tok)
		}
	})
	return err
}

// mayRead checks read access to names; nil tok (no ACLs) may read all.
func mayRead(tok *lockstate.TokenInfo, names ...string) error {
	for _, name := range names {
		if tok != nil && !tok.Allows(name, lockstate.AccessRead) {
			return refusal(lockstate.CodeForbidden, "token %s has no read access to %q", tok.ID, name)
		}
	}
	return nil
}

// mayAdmin checks that tok is a management token.
func mayAdmin(tok *lockstate.TokenInfo) error {
	if tok != nil && !tok.Admin() {
		return refusal(lockstate.CodeForbidden, "token %s is not a management token", tok.ID)
	}
	return nil
}

// owns reports whether tok may see and use a session owned by owner.
func owns(tok *lockstate.TokenInfo, owner string) bool {
	return tok == nil || tok.ID == owner || tok.Admin()
}

// redact blanks, in a view of one name, the session of each holder and
// waiter that tok does not own. A token that may read a name learns how
// it is held (modes, weights, fencing tokens, request ids) but names only
// its own sessions: an id it could not look up (GET /v1/sessions/{id}
// answers 404) is not handed out here either.
func redact(li *lockstate.LockInfo, tok *lockstate.TokenInfo) {
	for i := range li.Holders {
		if h := &li.Holders[i]; !owns(tok, h.Owner) {
			h.Session, h.Key = 0, ""
		}
	}
	for i := range li.Waiters {
		if w := &li.Waiters[i]; !owns(tok, w.Owner) {
			w.Session, w.Key = 0, ""
		}
	}
}

// withAuth stamps the caller's token into a command that acts for a
// client (one that embeds lockstate.Authority), refusing nobody while ACLs
// are on. The table checks it again on apply, against the tokens of that
// entry. BootstrapACL acts for nobody: nobody can have a token for it yet.
func (s *Service) withAuth(ctx context.Context, cmd lockstate.Command) error {
	a := lockstate.AuthorityOf(cmd)
	if a == nil {
		return nil
	}
	c := callerOf(ctx)
	auth := c.TokenID
	if auth == "" && s.cfg.ACL && !(c.Operator && forOperator(cmd)) {
		return refusal(lockstate.CodeUnauthorized, "a token is required (Authorization: Bearer <secret>)")
	}
	a.Auth = auth
	return nil
}

// forOperator reports whether cmd may be proposed without a token for an
// operator's certificate.
func forOperator(cmd lockstate.Command) bool {
	c, ok := cmd.(interface{ ForOperator() bool })
	return ok && c.ForOperator()
}

// NewToken is a token just made, with the one copy of its secret.
type NewToken struct {
	lockstate.TokenInfo
	Secret string
}

// Bootstrap makes the cluster's first management token. It works once per
// cluster; later calls get a forbidden refusal.
func (s *Service) Bootstrap(ctx context.Context) (NewToken, error) {
	id, secret, err := drawToken()
	if err != nil {
		return NewToken{}, err
	}
	cmd := &lockstate.BootstrapACL{ID: id, Hash: HashSecret(secret)}
	if _, _, err := s.propose(ctx, cmd, once); err != nil {
		return NewToken{}, err
	}
	rules := []lockstate.Rule{{Prefix: "", Access: lockstate.AccessAdmin}}
	return NewToken{TokenInfo: lockstate.TokenInfo{ID: id, Name: "bootstrap", Rules: rules}, Secret: secret}, nil
}

// CreateToken makes a token with rules; the caller must be a management token.
func (s *Service) CreateToken(ctx context.Context, name string, rules []lockstate.Rule, limits *lockstate.TokenLimits) (NewToken, error) {
	id, secret, err := drawToken()
	if err != nil {
		return NewToken{}, err
	}
	cmd := &lockstate.CreateToken{ID: id, Hash: HashSecret(secret), Name: name, Rules: rules, Limits: limits}
	if _, _, err := s.propose(ctx, cmd, once); err != nil {
		return NewToken{}, err
	}
	return NewToken{TokenInfo: lockstate.TokenInfo{ID: id, Name: name, Rules: rules, Limits: limits}, Secret: secret}, nil
}

// DeleteToken deletes a token: from its entry on, no node accepts it.
func (s *Service) DeleteToken(ctx context.Context, id string) error {
	_, _, err := s.propose(ctx, &lockstate.DeleteToken{ID: id}, once)
	return err
}

// Tokens lists the tokens (never their secrets); management tokens only.
func (s *Service) Tokens(ctx context.Context, c Consistency) ([]lockstate.TokenInfo, error) {
	if err := s.catchUp(ctx, c); err != nil {
		return nil, err
	}
	var out []lockstate.TokenInfo
	err := s.readAs(ctx, func(t *lockstate.Table, tok *lockstate.TokenInfo) error {
		if err := mayAdmin(tok); err != nil {
			return err
		}
		out = t.Tokens()
		return nil
	})
	return out, err
}

// drawToken draws a token's id (a random UUID) and secret (256 bits).
func drawToken() (id, secret string, err error) {
	var b [16 + 32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("lockservice: draw a token: %w", err)
	}
	u := b[:16]
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	id = fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	return id, base64.RawURLEncoding.EncodeToString(b[16:]), nil
}

// Revoked is one hold a revoke released.
type Revoked struct {
	Session string // its session's public id
	Name    string
	Token   uint64
	// Visible: the caller owns the session (or may see every one). Only
	// then may an answer name Session: admin on a name is no right to
	// other tokens' session ids.
	Visible bool
}

// Revoke releases every hold on name, whoever holds it (admin on name).
// Not repeated after an unknown outcome: a repeat could revoke a hold
// granted meanwhile.
func (s *Service) Revoke(ctx context.Context, name string) ([]Revoked, error) {
	res, index, err := s.propose(ctx, &lockstate.Revoke{Name: name}, once)
	if err != nil {
		return nil, err
	}
	s.waitApplied(ctx, index) // the owners below as of the revoke, at least
	var out []Revoked
	err = s.readAs(ctx, func(t *lockstate.Table, tok *lockstate.TokenInfo) error {
		out = revokedAs(res.Events, func(id lockstate.SessionID) bool {
			info, ok := t.Session(id)
			return ok && owns(tok, info.Owner)
		})
		return nil
	})
	if err != nil { // committed all the same: say what, showing no session
		out = revokedAs(res.Events, func(lockstate.SessionID) bool { return false })
	}
	return out, nil
}

// revokedAs lists a revoke's holds; visible says which sessions the
// caller may see.
func revokedAs(events []lockstate.Event, visible func(lockstate.SessionID) bool) []Revoked {
	out := []Revoked{}
	for _, ev := range events {
		if ev.Kind == lockstate.EvRevoked {
			out = append(out, Revoked{Session: lockstate.PublicID(ev.Session, ev.Key), Name: ev.Name, Token: ev.Token,
				Visible: visible(ev.Session)})
		}
	}
	return out
}

// resolveSession returns the table's id of the session clients know by
// key. A key this node does not know yet (the session was created through
// another node a moment ago) is looked for again after a read-index.
func (s *Service) resolveSession(ctx context.Context, key string) (lockstate.SessionID, error) {
	if key == "" {
		return 0, keyRefusal(key, false)
	}
	ids, found, err := s.sessionIDs(ctx, []string{key})
	if err != nil {
		return 0, err
	}
	return ids[0], keyRefusal(key, found[0])
}

// keyRefusal is the refusal of a session key that is empty or names no
// session (found false), or nil.
func keyRefusal(key string, found bool) error {
	switch {
	case key == "":
		return refusal(lockstate.CodeInvalid, "session is required")
	case !found:
		return refusal(lockstate.CodeNoSession, "session %q not found", key)
	}
	return nil
}

// sessionIDs looks session keys up in the table: ids[i] is keys[i]'s
// session, found[i] whether there is one ("" names none). Keys not found
// are looked up again after one read-index: a session created a moment
// ago may not be applied here yet.
func (s *Service) sessionIDs(ctx context.Context, keys []string) (ids []lockstate.SessionID, found []bool, err error) {
	ids, found = make([]lockstate.SessionID, len(keys)), make([]bool, len(keys))
	lookup := func() (missing bool) {
		s.fsm.Read(func(t *lockstate.Table) {
			for i, key := range keys {
				if !found[i] && key != "" {
					ids[i], found[i] = t.SessionByKey(key)
				}
				missing = missing || !found[i] && key != ""
			}
		})
		return missing
	}
	if lookup() {
		if err := s.catchUp(ctx, Linearizable); err != nil {
			return nil, nil, err
		}
		lookup()
	}
	return ids, found, nil
}

// Bootstrapped reports whether this node's table has ACLs bootstrapped.
func (s *Service) Bootstrapped() bool {
	var b bool
	s.fsm.Read(func(t *lockstate.Table) { b = t.ACLBootstrapped() })
	return b
}

// CallerOf returns the caller ctx carries (the zero Caller for nobody).
func CallerOf(ctx context.Context) Caller { return callerOf(ctx) }

// RequireAdmin checks, after a read-index, that the caller is a
// management token (with ACLs off and not bootstrapped, nobody passes
// too): for what is not a command, like removing a member.
func (s *Service) RequireAdmin(ctx context.Context) error {
	if err := s.catchUp(ctx, Linearizable); err != nil {
		return err
	}
	return s.readAs(ctx, func(_ *lockstate.Table, tok *lockstate.TokenInfo) error { return mayAdmin(tok) })
}
