package lockstate

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// ACL tokens live in the table, so that a token created or deleted on one
// node is created or deleted on every node at the same entry, and every
// command that acts for a client carries the id of the token it acts for
// (its Auth field): apply checks that token's rights against the state of
// that very entry. A node resolves a client's secret to a token id before
// proposing (only a hash of each secret is stored); the check that counts
// is the one here.
//
// Until a cluster is bootstrapped (BootstrapACL) a command without Auth is
// applied as before ACLs existed. From then on every client command must
// carry one: a node started without --acl cannot act around the tokens.

// Authority is the ACL token a command acts for: its id, or "" for
// nobody (before a cluster is bootstrapped). Every command that acts for a
// client embeds it, which is all the node needs to know to fill in the
// caller's token (AuthorityOf); apply checks it against the tokens of its
// own entry. It is inlined in the command's encoding at its place among
// the fields, as the "auth" key, left out when empty (but for the token
// commands, which have always written it: fsm keeps their bytes).
type Authority struct {
	Auth string `msgpack:"auth,omitempty"`
}

func (a *Authority) authority() *Authority { return a }

// AuthorityOf returns the Authority cmd embeds, for the node to fill in,
// or nil for a command that acts for nobody (ExpireSession(s) and Tick, which
// the leader proposes itself, and BootstrapACL, which nobody can hold a
// token for yet).
func AuthorityOf(cmd Command) *Authority {
	if c, ok := cmd.(interface{ authority() *Authority }); ok {
		return c.authority()
	}
	return nil
}

// Access is what a rule allows on the names under its prefix.
type Access string

// Access levels, each including the ones before it.
const (
	AccessRead  Access = "read"  // observe names
	AccessWrite Access = "write" // and hold them: sessions, acquire, release, surrender, cancel
	AccessAdmin Access = "admin" // and revoke them; on the prefix "": tokens, members, others' sessions
)

func (a Access) rank() int {
	switch a {
	case AccessRead:
		return 1
	case AccessWrite:
		return 2
	case AccessAdmin:
		return 3
	}
	return 0
}

// Rule gives Access to every name that starts with Prefix (byte-wise, as
// in Consul: "jobs/" covers "jobs/a"; "jobs" covers "jobs2" too). For a
// name, the rule with the longest matching prefix decides.
type Rule struct {
	Prefix string `msgpack:"prefix" json:"prefix"`
	Access Access `msgpack:"access" json:"access"`
}

// Limits on tokens.
const (
	MaxRules       = 64
	MaxTokenName   = 256
	TokenIDLen     = 36 // a UUID in its text form
	TokenHashLen   = 64 // SHA-256, hex
	maxTokenPrefix = MaxNameLen
)

// token is one ACL token.
type token struct {
	id      string
	name    string
	hash    string // hex SHA-256 of the secret
	rules   []Rule
	created uint64       // index of the entry that made it
	limits  *TokenLimits // its own per-token limits; nil: the cluster's
}

// acl is the table's token state.
type acl struct {
	bootstrapped uint64 // index of the BootstrapACL entry; 0 = never
	tokens       map[string]*token
	byHash       map[string]*token
}

func (a *acl) add(tok *token) {
	if a.tokens == nil {
		a.tokens, a.byHash = make(map[string]*token), make(map[string]*token)
	}
	a.tokens[tok.id], a.byHash[tok.hash] = tok, tok
}

// access returns what the token may do on name: the access of the rule
// with the longest prefix of name, or "" when none matches.
func (tok *token) access(name string) Access {
	best, found := Access(""), -1
	for _, r := range tok.rules {
		if strings.HasPrefix(name, r.Prefix) && len(r.Prefix) > found {
			best, found = r.Access, len(r.Prefix)
		}
	}
	return best
}

func (tok *token) allows(name string, want Access) bool {
	return tok.access(name).rank() >= want.rank()
}

// admin reports whether the token is a management token: admin on "".
func (tok *token) admin() bool { return tok.allows("", AccessAdmin) }

// writesSomewhere reports whether any rule gives write or more.
func (tok *token) writesSomewhere() bool {
	return slices.ContainsFunc(tok.rules, func(r Rule) bool { return r.Access.rank() >= AccessWrite.rank() })
}

// TokenInfo describes a token, never its secret.
type TokenInfo struct {
	ID      string       `json:"id"`
	Name    string       `json:"name"`
	Rules   []Rule       `json:"rules"`
	Created uint64       `json:"created"`
	Limits  *TokenLimits `json:"limits,omitempty"`
	tok     *token
}

func (tok *token) info() TokenInfo {
	ti := TokenInfo{ID: tok.id, Name: tok.name, Rules: slices.Clone(tok.rules), Created: tok.created, tok: tok}
	if tok.limits != nil {
		l := *tok.limits
		ti.Limits = &l
	}
	return ti
}

// Allows reports whether the token may act with access want on name.
func (ti TokenInfo) Allows(name string, want Access) bool {
	return ti.tok != nil && ti.tok.allows(name, want)
}

// Admin reports whether the token is a management token (admin on "").
func (ti TokenInfo) Admin() bool { return ti.tok != nil && ti.tok.admin() }

// TokenByHash returns the token whose secret hashes to hash (hex SHA-256).
func (t *Table) TokenByHash(hash string) (TokenInfo, bool) {
	tok := t.acl.byHash[hash]
	if tok == nil {
		return TokenInfo{}, false
	}
	return tok.info(), true
}

// Tokens returns every token, by id.
func (t *Table) Tokens() []TokenInfo {
	out := make([]TokenInfo, 0, len(t.acl.tokens))
	for _, tok := range t.acl.tokens {
		out = append(out, tok.info())
	}
	slices.SortFunc(out, func(a, b TokenInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// ACLBootstrapped reports whether BootstrapACL has been applied.
func (t *Table) ACLBootstrapped() bool { return t.acl.bootstrapped != 0 }

// authorize checks that the token auth may act with access on every name,
// and, when s is not nil, through session s: a session belongs to the
// token that created it, and only that token or a management token may use
// it. Without auth the command passes only while the cluster has no ACLs.
func (t *Table) authorize(auth string, s *session, access Access, names ...string) *Error {
	if auth == "" {
		if t.acl.bootstrapped != 0 {
			return errorf(CodeUnauthorized, "ACLs are bootstrapped: a token is required")
		}
		return nil
	}
	tok := t.acl.tokens[auth]
	if tok == nil {
		return errorf(CodeUnauthorized, "token %s does not exist", auth)
	}
	if s != nil && s.owner != auth && !tok.admin() {
		// As if it did not exist: whether a session id is another
		// token's must not be learned by trying it.
		return errorf(CodeNoSession, "session %d not found", s.id)
	}
	for _, name := range names {
		if !tok.allows(name, access) {
			return errorf(CodeForbidden, "token %s has no %s access to %q", auth, access, name)
		}
	}
	return nil
}

// MayUse reports whether the token auth may act through session id (see
// authorize): nil, or an Error coded unauthorized, forbidden or
// session_not_found.
func (t *Table) MayUse(auth string, id SessionID) *Error {
	s := t.sessions[id]
	if s == nil {
		return errorf(CodeNoSession, "session %d not found", id)
	}
	return t.authorize(auth, s, AccessWrite)
}

// Token returns a token by id.
func (t *Table) Token(id string) (TokenInfo, bool) {
	tok := t.acl.tokens[id]
	if tok == nil {
		return TokenInfo{}, false
	}
	return tok.info(), true
}

// validTokenID checks a token id: the form the node draws, a UUID's text.
func validTokenID(field, id string) *Error {
	if len(id) != TokenIDLen {
		return invalidf("%s %q is not a token id", field, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-') {
			return invalidf("%s %q is not a token id", field, id)
		}
	}
	return nil
}

// validAuth checks an Auth field: empty or a token id.
func validAuth(auth string) *Error {
	if auth == "" {
		return nil
	}
	return validTokenID("auth", auth)
}

func validHash(hash string) *Error {
	if len(hash) != TokenHashLen {
		return invalidf("hash is not a hex SHA-256")
	}
	for i := 0; i < len(hash); i++ {
		if c := hash[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return invalidf("hash is not a hex SHA-256")
		}
	}
	return nil
}

// ValidRules checks a token's rules: 1 to MaxRules, each a valid access on
// a prefix of at most MaxNameLen bytes of valid UTF-8, no prefix twice.
func ValidRules(rules []Rule) *Error {
	if len(rules) == 0 || len(rules) > MaxRules {
		return invalidf("rules must hold 1 to %d rules, not %d", MaxRules, len(rules))
	}
	for i, r := range rules {
		if r.Access.rank() == 0 {
			return invalidf("rule %d: access %q is not read, write or admin", i, r.Access)
		}
		if len(r.Prefix) > maxTokenPrefix || !utf8.ValidString(r.Prefix) || strings.ContainsFunc(r.Prefix, isControl) {
			return invalidf("rule %d: prefix must be valid UTF-8 without control characters, at most %d bytes", i, maxTokenPrefix)
		}
		for _, prev := range rules[:i] {
			if prev.Prefix == r.Prefix {
				return invalidf("rule %d: prefix %q is named twice", i, r.Prefix)
			}
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// BootstrapACL creates the first management token (admin on ""). It is
// refused once the cluster has been bootstrapped.
type BootstrapACL struct {
	ID   string `msgpack:"id"`
	Hash string `msgpack:"hash"`
}

// Validate checks the token's id and hash.
func (c *BootstrapACL) Validate() *Error {
	if err := validTokenID("id", c.ID); err != nil {
		return err
	}
	return validHash(c.Hash)
}

func (c *BootstrapACL) apply(t *Table) Result {
	if t.acl.bootstrapped != 0 {
		return Result{Err: errorf(CodeForbidden, "ACLs were bootstrapped at index %d; bootstrap is allowed once", t.acl.bootstrapped)}
	}
	if err := t.newToken(c.ID, c.Hash); err != nil {
		return Result{Err: err}
	}
	t.acl.bootstrapped = t.index
	t.acl.add(&token{id: c.ID, name: "bootstrap", hash: c.Hash, created: t.index,
		rules: []Rule{{Prefix: "", Access: AccessAdmin}}})
	return Result{}
}

// newToken refuses an id or hash already in use (both are drawn at random:
// a clash is a replayed or forged proposal).
func (t *Table) newToken(id, hash string) *Error {
	if t.acl.tokens[id] != nil || t.acl.byHash[hash] != nil {
		return errorf(CodeInvalid, "token id or secret already in use")
	}
	return nil
}

// CreateToken adds a token; Auth must be a management token.
type CreateToken struct {
	Authority
	ID    string `msgpack:"id"`
	Hash  string `msgpack:"hash"`
	Name  string `msgpack:"name,omitempty"`
	Rules []Rule `msgpack:"rules"`
	// Limits override the cluster's per-token limits for this token.
	Limits *TokenLimits `msgpack:"limits,omitempty"`
}

// OwnLimits reports whether the token carries limits of its own, which
// only log format 4 (fsm.FormatTokenLimits) can hold.
func (c *CreateToken) OwnLimits() bool { return c.Limits != nil }

// Validate checks the token's fields.
func (c *CreateToken) Validate() *Error {
	if err := validAuth(c.Auth); err != nil {
		return err
	}
	if err := validTokenID("id", c.ID); err != nil {
		return err
	}
	if err := validHash(c.Hash); err != nil {
		return err
	}
	if len(c.Name) > MaxTokenName || !utf8.ValidString(c.Name) || strings.ContainsFunc(c.Name, isControl) {
		return invalidf("name must be valid UTF-8 without control characters, at most %d bytes", MaxTokenName)
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	return ValidRules(c.Rules)
}

func (c *CreateToken) apply(t *Table) Result {
	if err := t.authorize(c.Auth, nil, AccessAdmin, ""); err != nil {
		return Result{Err: err}
	}
	if err := t.newToken(c.ID, c.Hash); err != nil {
		return Result{Err: err}
	}
	tok := &token{id: c.ID, name: c.Name, hash: c.Hash, rules: slices.Clone(c.Rules), created: t.index}
	if c.Limits != nil {
		l := *c.Limits
		tok.limits = &l
	}
	t.acl.add(tok)
	return Result{}
}

// DeleteToken removes a token: from this entry on, no command carrying it
// is applied. Sessions it created stay (an admin may close them).
type DeleteToken struct {
	Authority
	ID string `msgpack:"id"`
}

// Validate checks the ids.
func (c *DeleteToken) Validate() *Error {
	if err := validAuth(c.Auth); err != nil {
		return err
	}
	return validTokenID("id", c.ID)
}

func (c *DeleteToken) apply(t *Table) Result {
	if err := t.authorize(c.Auth, nil, AccessAdmin, ""); err != nil {
		return Result{Err: err}
	}
	tok := t.acl.tokens[c.ID]
	if tok == nil {
		return Result{Err: errorf(CodeNoToken, "token %s not found", c.ID)}
	}
	delete(t.acl.tokens, tok.id)
	delete(t.acl.byHash, tok.hash)
	return Result{}
}
