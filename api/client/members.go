package client

import (
	"context"
	"fmt"
	"net/url"

	"github.com/lockd/lockd/api/wire"
)

// Membership changes are operator calls: they need an operator's client
// certificate (WithTLS) or a management token (docs/security.md).

// RemoveMember removes server id from the cluster's raft configuration
// (DELETE /v1/members/{id}), for a node that is gone for good, and
// returns the members afterwards. The cluster refuses a member its gossip
// sees alive, which it would add back (an error matching ErrMemberAlive:
// make it leave, or stop it and ask again once it is seen dead), and the
// leader (ErrInvalidRequest: it must leave). Removing is idempotent, so
// the call is repeated after an unknown outcome.
func (c *Client) RemoveMember(ctx context.Context, id string) ([]Member, error) {
	var out wire.RemoveMemberResponse
	if err := c.do(ctx, call{method: "DELETE", path: "/v1/members/" + url.PathEscape(id), out: &out}); err != nil {
		return nil, fmt.Errorf("lockd remove member %s: %w", id, err)
	}
	return out.Members, nil
}

// Leave asks member id to leave the cluster for good (POST
// /v1/agent/leave on that node, at the HTTP address the cluster lists
// for it, once that node has said it is id): it takes itself out of the
// raft configuration and gossip, then stops. Leave returns once the node
// has accepted, not once it is gone. An id the cluster does not list
// matches ErrUnknownMember. Not repeated after an unknown outcome.
func (c *Client) Leave(ctx context.Context, id string) error {
	st, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("lockd leave %s: %w", id, err)
	}
	addr := ""
	for _, m := range st.Members {
		if m.ID == id {
			addr = m.HTTPAddr
		}
	}
	if addr == "" {
		return fmt.Errorf("lockd leave %s: %w: %s lists no node %s with an HTTP address", id, ErrUnknownMember, st.NodeID, id)
	}
	base := c.baseURL(addr)
	var self Status
	if err := c.send(ctx, base, call{method: "GET", path: "/v1/status", out: &self}); err != nil {
		return fmt.Errorf("lockd leave %s: %w", id, err)
	}
	if self.NodeID != id {
		return fmt.Errorf("lockd leave %s: %w: the node at %s, its address, is %s", id, ErrUnknownMember, addr, self.NodeID)
	}
	if err := c.send(ctx, base, call{method: "POST", path: "/v1/agent/leave"}); err != nil {
		return fmt.Errorf("lockd leave %s: %w", id, err)
	}
	return nil
}
