package fsm

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"

	"github.com/lockd/lockd/lockstate"
)

// aclGen is the generator's ACL side: it bootstraps, makes and deletes
// tokens, revokes names, and gives most commands their session owner's
// token and some another's or none, so that every refusal path is taken.
type aclGen struct {
	bootstrapped bool
	tokens       []string // live token ids; tokens[0] is the management token
	next         int      // tokens made
	keys         []string // session keys drawn, for the odd reuse
	ids          []string // token ids drawn, for the odd reuse
	owner        map[lockstate.SessionID]string
	codes        map[lockstate.Code]int // refusals seen
}

// genBytes is 32 bytes drawn from the generator's source, made unique by
// n: ids, hashes and keys in no particular order (Export sorts them), the
// same for the same source. It draws once, so a fuzzer's bytes last.
func (g *gen) genBytes(what string, n int) [32]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(n))
	binary.BigEndian.PutUint64(b[8:], uint64(g.src.IntN(1<<30)))
	return sha256.Sum256(append([]byte(what), b[:]...))
}

// genTokenID draws a token id, in a UUID's text form.
func (g *gen) genTokenID(n int) string {
	h := fmt.Sprintf("%x", g.genBytes("id", n))
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// genTokenHash draws a token's hash, 64 hex digits.
func (g *gen) genTokenHash(n int) string {
	b := g.genBytes("hash", n)
	return fmt.Sprintf("%x", b)
}

// genKey draws a session key as the leader does: 128 bits in base64url,
// with a letter first so that it is never all digits.
func (g *gen) genKey(n int) string {
	b := g.genBytes("key", n)
	return "k" + base64.RawURLEncoding.EncodeToString(b[:16])
}

var genLimits = &lockstate.Limits{Sessions: 40, HoldsPerSession: 4, WaitersPerName: 2, Waiters: 12}

// aclize turns a generated command into one of an ACL cluster's, or
// replaces it with an ACL command.
func (g *gen) aclize(cmd lockstate.Command) lockstate.Command {
	a := g.acl
	if !a.bootstrapped {
		a.next++
		return &lockstate.BootstrapACL{ID: g.genTokenID(a.next), Hash: g.genTokenHash(a.next)}
	}
	switch p := g.src.IntN(100); {
	case p < 3:
		return g.newToken()
	case p < 4 && len(a.tokens) > 1:
		return &lockstate.DeleteToken{Authority: lockstate.Authority{Auth: g.someToken()}, ID: a.tokens[1+g.src.IntN(len(a.tokens)-1)]}
	case p < 8:
		return &lockstate.Revoke{Name: genNames[g.src.IntN(len(genNames))], Authority: lockstate.Authority{Auth: g.someToken()}}
	case p < 9: // a few serials, so that some are denied twice
		return &lockstate.DenyCert{Serial: fmt.Sprintf("%x", 1+g.src.IntN(5)), Reason: "gen", Authority: lockstate.Authority{Auth: g.someToken()}}
	}
	auth, leader := lockstate.AuthorityOf(cmd), LeaderFieldsOf(cmd)
	switch {
	case auth == nil:
		return cmd
	case leader.Key != nil: // a new session: some token owns it
		*leader.Key, auth.Auth = g.sessionKey(), g.someToken()
	default:
		auth.Auth = g.authFor(sessionOf(cmd))
	}
	if leader.Limits != nil && g.pct(limitsPct(leader)) {
		*leader.Limits = genLimits
	}
	return cmd
}

// limitsPct is how often a command gets the leader's limits: an acquire
// more often than a new session.
func limitsPct(leader LeaderFields) int {
	if leader.Key != nil {
		return 20
	}
	return 30
}

// sessionOf returns the session a command acts on (its Session field), or
// 0.
func sessionOf(cmd lockstate.Command) lockstate.SessionID {
	if f := reflect.ValueOf(cmd).Elem().FieldByName("Session"); f.IsValid() {
		return lockstate.SessionID(f.Uint())
	}
	return 0
}

// newToken makes a token with one or two random rules.
func (g *gen) newToken() lockstate.Command {
	a := g.acl
	a.next++
	prefixes := []string{"", "a", "a/b", "b/", "sem", "pool/"}
	access := []lockstate.Access{lockstate.AccessRead, lockstate.AccessWrite, lockstate.AccessWrite, lockstate.AccessAdmin}
	id := g.genTokenID(a.next)
	if len(a.ids) > 0 && g.pct(3) {
		id = a.ids[g.src.IntN(len(a.ids))] // taken, or deleted: the table decides
	}
	a.ids = append(a.ids, id)
	c := &lockstate.CreateToken{Authority: lockstate.Authority{Auth: g.someToken()}, ID: id, Hash: g.genTokenHash(a.next),
		Name: fmt.Sprintf("t%d", a.next)}
	for range 1 + g.src.IntN(2) {
		r := lockstate.Rule{Prefix: prefixes[g.src.IntN(len(prefixes))], Access: access[g.src.IntN(len(access))]}
		if !slices.ContainsFunc(c.Rules, func(o lockstate.Rule) bool { return o.Prefix == r.Prefix }) {
			c.Rules = append(c.Rules, r)
		}
	}
	return c
}

// someToken is mostly the management token, sometimes another, rarely one
// that does not exist.
func (g *gen) someToken() string {
	a := g.acl
	switch p := g.src.IntN(100); {
	case p < 60 || len(a.tokens) == 1:
		return a.tokens[0]
	case p < 95:
		return a.tokens[g.src.IntN(len(a.tokens))]
	}
	return "00000000-0000-4000-8000-000000009999"
}

// sessionKey is mostly a new key, sometimes one drawn before (in use, or
// its session gone), rarely none (a session created before keys).
func (g *gen) sessionKey() string {
	a := g.acl
	switch p := g.src.IntN(100); {
	case p < 3 && len(a.keys) > 0:
		return a.keys[g.src.IntN(len(a.keys))]
	case p < 5:
		return ""
	}
	k := g.genKey(len(a.keys))
	a.keys = append(a.keys, k)
	return k
}

// authFor is mostly the session's owner, sometimes another token or none.
func (g *gen) authFor(s lockstate.SessionID) string {
	switch p := g.src.IntN(100); {
	case p < 85 && g.acl.owner[s] != "":
		return g.acl.owner[s]
	case p < 97:
		return g.someToken()
	}
	return ""
}

func (g *gen) aclObserve(cmd lockstate.Command, res *lockstate.Result) {
	a := g.acl
	if res == nil {
		return
	}
	if res.Err != nil {
		if a.codes == nil {
			a.codes = map[lockstate.Code]int{}
		}
		a.codes[res.Err.Code]++
		return
	}
	switch c := cmd.(type) {
	case *lockstate.BootstrapACL:
		a.bootstrapped, a.tokens, a.owner = true, []string{c.ID}, map[lockstate.SessionID]string{}
	case *lockstate.CreateToken:
		a.tokens = append(a.tokens, c.ID)
	case *lockstate.DeleteToken:
		a.tokens = slices.DeleteFunc(a.tokens, func(id string) bool { return id == c.ID })
	case *lockstate.CreateSession:
		a.owner[res.Session] = c.Auth
	}
}
