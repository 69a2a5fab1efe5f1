package lockservice

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// blocking says, for a timeout message, who holds what the request
// wanted, from this node's table once it has applied index. A session of
// a token other than the caller's is not named (a management token sees
// every id).
func (s *Service) blocking(ctx context.Context, specs []lockstate.LockSpec, index uint64) string {
	s.waitApplied(ctx, index)
	var parts []string
	err := s.readAs(ctx, func(t *lockstate.Table, tok *lockstate.TokenInfo) error {
		visible := func(id lockstate.SessionID) bool {
			info, ok := t.Session(id)
			return tok == nil || ok && owns(tok, info.Owner)
		}
		readable := func(name string) bool { return mayRead(tok, name) == nil }
		for _, sp := range specs {
			parts = append(parts, describeName(t, sp.Name, visible, readable))
		}
		return nil
	})
	if err != nil {
		return "who holds it is not told: " + err.Error()
	}
	return strings.Join(parts, "; ")
}

// describeName names the holders of name, or of the nearest related name
// that holds it up; a related name the caller may not read is not
// described.
func describeName(t *lockstate.Table, name string, visible func(lockstate.SessionID) bool, readable func(string) bool) string {
	if li, ok := t.Lock(name); ok && len(li.Holders) > 0 {
		return fmt.Sprintf("%s is held by %s", name, describeHolders(li, visible))
	}
	for p := name; strings.Contains(p, "/"); {
		p = p[:strings.LastIndexByte(p, '/')]
		if li, ok := t.Lock(p); ok && len(li.Holders) > 0 {
			if !readable(p) {
				return fmt.Sprintf("%s is covered by a held name this token may not read", name)
			}
			return fmt.Sprintf("%s is covered by %s, held by %s", name, p, describeHolders(li, visible))
		}
	}
	for _, li := range t.Locks(name + "/") {
		if len(li.Holders) > 0 {
			if !readable(li.Name) {
				return fmt.Sprintf("%s has a held name below it that this token may not read", name)
			}
			return fmt.Sprintf("%s has %s below it, held by %s", name, li.Name, describeHolders(li, visible))
		}
	}
	li, ok := t.Lock(name)
	switch {
	case ok && li.DelayedUntil != 0:
		return fmt.Sprintf("%s is in lock-delay until %s", name, time.Unix(0, li.DelayedUntil).UTC().Format(time.RFC3339Nano))
	case ok && len(li.Waiters) > 0:
		return fmt.Sprintf("%s has %d earlier waiter(s)", name, len(li.Waiters))
	}
	return fmt.Sprintf("%s is not held now", name)
}

func describeHolders(li lockstate.LockInfo, visible func(lockstate.SessionID) bool) string {
	holders := make([]string, 0, len(li.Holders))
	for _, h := range li.Holders {
		who := "another token's session"
		if visible(h.Session) {
			who = "session " + h.Key
		}
		holders = append(holders, fmt.Sprintf("%s (%s, token %d)", who, h.Mode, h.Token))
	}
	return strings.Join(holders, ", ")
}
