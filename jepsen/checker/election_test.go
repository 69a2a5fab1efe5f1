package checker

import (
	"strings"
	"testing"

	"github.com/lockd/lockd/jepsen/history"
)

const en = "jepsen/election"

// campaign is p's acquire of en with value v, granted with tok.
func (h *hb) campaign(p int, v string, tok uint64) {
	h.campaignInv(p, v)
	h.granted(p, wg(en, tok))
}

func (h *hb) campaignInv(p int, v string) {
	h.add(history.Event{Type: history.Invoke, Process: p, F: history.Acquire,
		Locks: []history.Lock{{Name: en, Mode: "write", Value: v}}})
}

func (h *hb) proclaimInv(p int, tok uint64, v string) {
	h.add(history.Event{Type: history.Invoke, Process: p, F: history.Proclaim, Names: []string{en}, Token: tok, Text: v})
}

// proclaimed completes p's proclaim: ok with the hold's token and value
// as answered, else fail or info.
func (h *hb) proclaimed(p int, typ history.Type, tok uint64, v string) {
	h.add(history.Event{Type: typ, Process: p, F: history.Proclaim, Names: []string{en}, Token: tok, Text: v})
}

// proclaim is p's acknowledged proclaim of v under tok.
func (h *hb) proclaim(p int, tok uint64, v string) {
	h.proclaimInv(p, tok, v)
	h.proclaimed(p, history.OK, tok, v)
}

// leader is a whole election read by process p (its own worker) that
// saw token tok with value v (tok 0: no leader).
func (h *hb) leader(p int, tok uint64, v string) {
	h.leaderInv(p)
	h.leaderSaw(p, tok, v)
}

func (h *hb) leaderInv(p int) {
	h.add(history.Event{Type: history.Invoke, Process: p, F: history.Leader, Names: []string{en}})
}

func (h *hb) leaderSaw(p int, tok uint64, v string) {
	h.add(history.Event{Type: history.OK, Process: p, F: history.Leader, Names: []string{en}, Token: tok, Text: v})
}

func TestElection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(h *hb)
		flag  string // "": valid; else a part of the anomaly it must report
	}{
		{"leaders, their proclaims and no leader between them, in order", func(h *hb) {
			h.leader(8, 0, "")
			h.campaign(1, "c1-1", 10)
			h.leader(8, 10, "c1-1")
			h.proclaim(1, 10, "c1-2")
			h.leader(9, 10, "c1-2")
			h.proclaim(1, 10, "c1-3")
			h.leader(8, 10, "c1-3")
			h.release(1, en)
			h.leader(8, 0, "")
			h.campaign(2, "c2-1", 14)
			h.leader(9, 14, "c2-1")
			h.leader(8, 14, "c2-1")
		}, ""},
		{"a campaign and a proclaim of unknown outcome, seen", func(h *hb) {
			h.campaignInv(1, "c1-1")
			h.leader(8, 10, "c1-1")
			h.done(1, history.Acquire, history.Info, "")
			h.campaign(2, "c2-1", 14)
			h.proclaimInv(2, 14, "c2-2")
			h.leader(8, 14, "c2-2")
			h.proclaimed(2, history.Info, 0, "")
		}, ""},
		{"reads concurrent with a proclaim see the old value, then the new", func(h *hb) {
			h.campaign(1, "c1-1", 10)
			h.proclaimInv(1, 10, "c1-2")
			h.leader(8, 10, "c1-1")
			h.leader(8, 10, "c1-2")
			h.proclaimed(1, history.OK, 10, "c1-2")
		}, ""},
		{"a deposed leader's proclaim is refused and never seen", func(h *hb) {
			h.campaign(1, "c1-1", 10)
			h.campaign(2, "c2-1", 14) // 1's hold ended by its TTL
			h.proclaimInv(1, 10, "c1-2")
			h.proclaimed(1, history.Fail, 0, "")
			h.leader(8, 14, "c2-1")
		}, ""},
		{"a deposed leader's value under its successor's token", func(h *hb) {
			h.campaign(1, "c1-1", 10)
			h.campaign(2, "c2-1", 14)
			h.proclaimInv(1, 10, "c1-2")
			h.proclaimed(1, history.OK, 14, "c1-2") // given to 2's hold
			h.leader(8, 14, "c1-2")
		}, "read at event 7 (process 8) shows token 14 with value \"c1-2\": the value of a proclaim under another token"},
		{"a deposed leader's proclaim answered with its successor's token", func(h *hb) {
			h.campaign(1, "c1-1", 10)
			h.campaign(2, "c2-1", 14)
			h.proclaimInv(1, 10, "c1-2")
			h.proclaimed(1, history.OK, 14, "c1-2")
		}, "proclaim answer at event 5 (process 1) shows token 14"},
		{"a value nobody set", func(h *hb) {
			h.campaign(1, "c1-1", 10)
			h.leader(8, 10, "c9-9")
		}, "a value nobody set"},
		{"the value of a refused proclaim", func(h *hb) {
			h.campaign(1, "c1-1", 10)
			h.proclaimInv(1, 10, "c1-2")
			h.proclaimed(1, history.Fail, 0, "")
			h.leader(8, 10, "c1-2")
		}, "the value of a refused proclaim"},
		{"a campaign's value under another token", func(h *hb) {
			h.campaign(1, "c1-1", 10)
			h.release(1, en)
			h.campaign(2, "c2-1", 14)
			h.leader(8, 14, "c1-1")
		}, "the value of a campaign under another token"},
		{"an unknown campaign's value under another process's token", func(h *hb) {
			h.campaignInv(1, "c1-1")
			h.done(1, history.Acquire, history.Info, "")
			h.campaign(2, "c2-1", 14)
			h.leader(8, 14, "c1-1")
		}, "campaign of unknown outcome by another process"},
		{"an observer sees tokens go back", func(h *hb) {
			h.campaignInv(1, "c1-1")
			h.campaignInv(2, "c2-1")
			h.leader(8, 14, "c2-1")
			h.leader(8, 10, "c1-1")
			h.granted(1, wg(en, 10))
			h.granted(2, wg(en, 14))
		}, "observer 8 saw token 10 at event 5 after token 14"},
		{"an observer sees an older value of one leader after a newer", func(h *hb) {
			h.campaign(1, "c1-1", 10)
			h.proclaimInv(1, 10, "c1-2")
			h.leader(8, 10, "c1-2")
			h.leader(8, 10, "c1-1")
			h.proclaimed(1, history.OK, 10, "c1-2")
		}, "observer 8 saw under token 10 value \"c1-1\" (rank 0)"},
		{"a read shows a leader older than one acknowledged before it", func(h *hb) {
			h.campaign(1, "c1-1", 10)
			h.release(1, en)
			h.campaign(2, "c2-1", 14)
			h.leader(8, 10, "c1-1")
		}, "stale read at event 7: leader token 10, below token 14"},
		{"a read shows a value older than one acknowledged before it", func(h *hb) {
			h.campaign(1, "c1-1", 10)
			h.proclaim(1, 10, "c1-2")
			h.leader(8, 10, "c1-1")
		}, "stale read at event 5: under token 10 value \"c1-1\" (rank 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hb{}
			tc.build(h)
			r := Election(h.ev, Config{Workload: "election"})
			if tc.flag == "" {
				if !r.OK() {
					t.Fatalf("verdict %s, want valid: %v", r.Verdict, r.Anomalies)
				}
				return
			}
			if r.OK() || !strings.Contains(strings.Join(r.Anomalies, "\n"), tc.flag) {
				t.Fatalf("verdict %s %v, want invalid with %q", r.Verdict, r.Anomalies, tc.flag)
			}
		})
	}
}

// All runs the election checker on a history with election reads, and
// the fencing checkers judge the leaders' writes: two leaders writing
// under overlapping tenures are flagged by Safety.
func TestAllJudgesLeadersLikeHolders(t *testing.T) {
	h := &hb{}
	h.campaign(1, "c1-1", 10)
	h.campaign(2, "c2-1", 14) // while 1 still leads
	h.res(1, history.ResWrite, wg(en, 10), 1, 1, "")
	h.res(2, history.ResWrite, wg(en, 14), 2, 2, "")
	h.res(1, history.ResWrite, wg(en, 10), 3, 3, "")
	h.leader(8, 14, "c2-1")
	verdicts := map[string]Verdict{}
	for _, r := range All(h.ev, Config{Workload: "election", Fenced: true}) {
		verdicts[r.Checker] = r.Verdict
	}
	if verdicts["election"] != Valid || verdicts["safety"] != Invalid {
		t.Fatalf("verdicts %v, want election valid, safety invalid", verdicts)
	}
}
