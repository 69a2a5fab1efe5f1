package fsm

import (
	"fmt"
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
	keys         int      // session keys drawn
	owner        map[lockstate.SessionID]string
	codes        map[lockstate.Code]int // refusals seen
}

func genTokenID(n int) string   { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }
func genTokenHash(n int) string { return fmt.Sprintf("%064x", n+1) }

var genLimits = &lockstate.Limits{Sessions: 40, HoldsPerSession: 4, WaitersPerName: 2, Waiters: 12}

// aclize turns a generated command into one of an ACL cluster's, or
// replaces it with an ACL command.
func (g *gen) aclize(cmd lockstate.Command) lockstate.Command {
	a := g.acl
	if !a.bootstrapped {
		a.next++
		return &lockstate.BootstrapACL{ID: genTokenID(a.next), Hash: genTokenHash(a.next)}
	}
	switch p := g.src.IntN(100); {
	case p < 3:
		return g.newToken()
	case p < 4 && len(a.tokens) > 1:
		return &lockstate.DeleteToken{Auth: g.someToken(), ID: a.tokens[1+g.src.IntN(len(a.tokens)-1)]}
	case p < 8:
		return &lockstate.Revoke{Name: genNames[g.src.IntN(len(genNames))], Auth: g.someToken()}
	}
	switch c := cmd.(type) {
	case *lockstate.CreateSession:
		a.keys++
		c.Key, c.Auth = fmt.Sprintf("key-%018d", a.keys), g.someToken()
		if g.pct(20) {
			c.Limits = genLimits
		}
	case *lockstate.CloseSession:
		c.Auth = g.authFor(c.Session)
	case *lockstate.Acquire:
		c.Auth = g.authFor(c.Session)
		if g.pct(30) {
			c.Limits = genLimits
		}
	case *lockstate.Release:
		c.Auth = g.authFor(c.Session)
	case *lockstate.Surrender:
		c.Auth = g.authFor(c.Session)
	case *lockstate.Cancel:
		c.Auth = g.authFor(c.Session)
	}
	return cmd
}

// newToken makes a token with one or two random rules.
func (g *gen) newToken() lockstate.Command {
	a := g.acl
	a.next++
	prefixes := []string{"", "a", "a/b", "b/", "sem", "pool/"}
	access := []lockstate.Access{lockstate.AccessRead, lockstate.AccessWrite, lockstate.AccessWrite, lockstate.AccessAdmin}
	c := &lockstate.CreateToken{Auth: g.someToken(), ID: genTokenID(a.next), Hash: genTokenHash(a.next),
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
	return genTokenID(9999)
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
