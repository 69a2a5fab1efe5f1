package raftnode

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// sessionKeyBytes is the randomness of a session key: 128 bits, 22
// characters of base64url.
const sessionKeyBytes = 16

// stamp fills in what only the leader decides, just before it proposes
// (the command's fsm.LeaderFields): a new session's key, drawn here so
// that no client and no follower chooses it, this node's limits, and
// whether an acquire's request id is its session's own. Entries in
// formats before fsm.FormatACL carry neither key nor limits (an older
// voter could not read them): the session's id in decimal is then its
// key.
func (n *Node) stamp(cmd lockstate.Command, format fsm.Format) error {
	if flaw := n.cfg.flaws.propose; flaw != nil {
		flaw(n, cmd)
	}
	f := fsm.LeaderFieldsOf(cmd)
	if f.Key != nil && format == formatUnknown {
		// A new leader that has not yet seen its voters' builds: wait for
		// it rather than give a session a guessable key.
		return fmt.Errorf("%w: the voters' log format is not known yet", errRetry)
	}
	if f.SessionScoped != nil {
		// Set either way, whatever a forwarded command said: an older
		// voter applies an acquire by the rule before, so ids are the
		// session's own only once every voter applies the new one.
		*f.SessionScoped = format >= fsm.FormatSessionRequestIDs
	}
	if format < fsm.FormatACL {
		return nil
	}
	if f.Key != nil {
		key, err := NewSessionKey()
		if err != nil {
			return err
		}
		*f.Key = key
	}
	if f.Limits != nil {
		*f.Limits = n.limits(format)
	}
	return nil
}

// limits returns the configured limits, or nil when there are none.
// Entries in formats before fsm.FormatTokenLimits carry no per-token
// limits (an older voter could not read them): until every voter runs a
// build that applies them, tokens are capped only by the other limits.
func (n *Node) limits(format fsm.Format) *lockstate.Limits {
	l := n.cfg.Limits
	if format < fsm.FormatTokenLimits {
		l.SessionsPerToken, l.WaitersPerToken = 0, 0
	}
	if l == (lockstate.Limits{}) {
		return nil
	}
	return &l
}

// formatUnknown is what SetLogFormat's function returns before it knows.
const formatUnknown fsm.Format = 0

// NewSessionKey draws a session key: 128 random bits in base64url that
// pass usableKey.
func NewSessionKey() (string, error) {
	for {
		var b [sessionKeyBytes]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("raftnode: draw a session key: %w", err)
		}
		if key := base64.RawURLEncoding.EncodeToString(b[:]); usableKey(key) {
			return key, nil
		}
	}
}

// usableKey reports whether a drawn key may name a session: one the table
// takes (lockstate.ValidKey), and not starting with "-", which a command
// line would take for a flag (lockctl session show -4Yyb...). Redrawing
// the 1 in 64 keys that start so costs under 0.03 of the 128 bits; the
// table still takes them, as logs written before this rule hold some.
func usableKey(key string) bool {
	return !strings.HasPrefix(key, "-") && lockstate.ValidKey(key) == nil
}
