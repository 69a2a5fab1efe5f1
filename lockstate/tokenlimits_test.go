package lockstate

import (
	"strings"
	"testing"
	"time"
)

// Per-token limits cap the live sessions and the queued requests of one
// token, counted across the table and across an export and load; a
// token's own limits override the entry's, and another token keeps its
// room.
func TestPerTokenLimits(t *testing.T) {
	lim := &Limits{SessionsPerToken: 2, WaitersPerToken: 1}
	const capped, free, tight = 4, 5, 6
	cases := []struct {
		name     string
		tok      int
		own      *TokenLimits
		sessions int // how many it may open under lim
	}{
		{"cluster's limit", jobs, nil, 2},
		{"management token too", admin, nil, 2},
		{"own limit", capped, &TokenLimits{Sessions: 3}, 3},
		{"no limit of its own", free, &TokenLimits{Sessions: NoLimit}, 5},
		{"tighter own limit", tight, &TokenLimits{Sessions: 1}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := aclDriver(t)
			if c.tok != jobs && c.tok != admin {
				d.must(&CreateToken{Authority: Authority{Auth: tokenID(admin)}, ID: tokenID(c.tok), Hash: tokenHash(c.tok), Name: c.name,
					Rules: []Rule{{Prefix: "jobs/", Access: AccessWrite}}, Limits: c.own})
			}
			for range c.sessions {
				d.must(&CreateSession{TTL: 10 * time.Second, Authority: Authority{Auth: tokenID(c.tok)}, Limits: lim})
			}
			if c.sessions < 5 {
				d.refused(&CreateSession{TTL: 10 * time.Second, Authority: Authority{Auth: tokenID(c.tok)}, Limits: lim}, CodeLimit)
			}
			d.must(&CreateSession{TTL: 10 * time.Second, Authority: Authority{Auth: tokenID(other)}, Limits: lim}) // another token
		})
	}
}

func TestPerTokenWaiters(t *testing.T) {
	d := aclDriver(t)
	lim := &Limits{SessionsPerToken: 3, WaitersPerToken: 1}
	acq := func(s SessionID, auth int, name string) *Acquire {
		return &Acquire{Session: s, Authority: Authority{Auth: tokenID(auth)}, Wait: time.Minute, Limits: lim,
			Locks: []LockSpec{{Name: name, Mode: Write}}}
	}
	holder := d.ownedSession(admin)
	d.must(acq(holder, admin, "jobs/a"))
	d.must(acq(holder, admin, "jobs/b"))
	s1, s2 := d.ownedSession(jobs), d.ownedSession(jobs)
	d.must(acq(s1, jobs, "jobs/a")) // queued: the token's one waiter
	res := d.apply(acq(s2, jobs, "jobs/b"))
	if res.Err == nil || res.Err.Code != CodeLimit || !strings.Contains(res.Err.Message, "waiters per token") {
		t.Fatalf("second waiter of the token: %v", res.Err)
	}
	d.tab = reload(t, d.tab) // the counts survive a snapshot
	d.refused(acq(s2, jobs, "jobs/b"), CodeLimit)
	d.refused(&CreateSession{TTL: 10 * time.Second, Authority: Authority{Auth: tokenID(jobs)}, Limits: &Limits{SessionsPerToken: 2}}, CodeLimit)
	d.must(&CloseSession{Session: s1, Authority: Authority{Auth: tokenID(jobs)}}) // its waiter and session go
	d.must(acq(s2, jobs, "jobs/b"))
}
