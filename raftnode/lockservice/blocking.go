package lockservice

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockd/lockd/lockstate"
)

// blocking says, for a timeout message, who holds what the request
// wanted, from this node's table once it has applied index.
func (s *Service) blocking(ctx context.Context, specs []lockstate.LockSpec, index uint64) string {
	s.waitApplied(ctx, index)
	var parts []string
	s.fsm.Read(func(t *lockstate.Table) {
		for _, sp := range specs {
			parts = append(parts, describeName(t, sp.Name))
		}
	})
	return strings.Join(parts, "; ")
}

// describeName names the holders of name, or of the nearest related name
// that holds it up.
func describeName(t *lockstate.Table, name string) string {
	if li, ok := t.Lock(name); ok && len(li.Holders) > 0 {
		return fmt.Sprintf("%s is held by %s", name, describeHolders(li))
	}
	for p := name; strings.Contains(p, "/"); {
		p = p[:strings.LastIndexByte(p, '/')]
		if li, ok := t.Lock(p); ok && len(li.Holders) > 0 {
			return fmt.Sprintf("%s is covered by %s, held by %s", name, p, describeHolders(li))
		}
	}
	for _, li := range t.Locks(name + "/") {
		if len(li.Holders) > 0 {
			return fmt.Sprintf("%s has %s below it, held by %s", name, li.Name, describeHolders(li))
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

func describeHolders(li lockstate.LockInfo) string {
	holders := make([]string, 0, len(li.Holders))
	for _, h := range li.Holders {
		holders = append(holders, fmt.Sprintf("session %s (%s, token %d)", h.Key, h.Mode, h.Token))
	}
	return strings.Join(holders, ", ")
}
