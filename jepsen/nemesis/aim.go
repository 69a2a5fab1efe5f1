package nemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/lockd/lockd/jepsen/compose"
	"github.com/lockd/lockd/jepsen/history"
)

// Aimed faults. A negative control proves that the checkers see a
// violation only on a run where the violation happened; a fault drawn at
// random may land where it breaks nothing (a clock step between holds, a
// replacement the old leader takes back as a follower). For such
// controls the nemesis aims instead of drawing: it waits for the
// condition the control breaks, applies its fault then, and records an
// info event F Exercised (Targets: the evidence) or Missed (Error: why
// not) after each attempt. The run's judge (lockjepsen) reads them.

// Aims: the controls the nemesis can aim at (Config.Aim).
const (
	// AimWallClock: a forward step of the leader's clock, past the hold
	// TTL, right after a contended grant with a hold TTL (the control of
	// lockd --unsafe wall-clock, whose leader then ends that hold early).
	AimWallClock = "wall-clock"
	// AimLoneReplacement: a follower replaced by a fresh node that
	// bootstraps a cluster of its own (Config.LoneReplacements), then the
	// leader killed and restarted so that clients fail over, some of them
	// to the lone node; the attempt is exercised once the lone node,
	// alone in its configuration, grants while the cluster has a leader.
	AimLoneReplacement = "lone-replacement"
	// AimNoFsync: a power loss of a majority, the first fault and every
	// one after it (the control of lockd --unsafe no-fsync, whose nodes
	// then come back without entries they acknowledged); drawn at random
	// among the power faults, a short run may never have one.
	AimNoFsync = "no-fsync"
)

// Evidence event names (history.Event.F of a Nemesis info event).
const (
	// Aiming marks the start of an attempt: its fault comes after it
	// (the fault's own start event is recorded once it is applied,
	// which can take seconds).
	Aiming    = "aiming"
	Exercised = "exercised"
	Missed    = "missed"
)

// aimTries bounds the attempts of one run (each ends in Exercised or
// Missed); the run's length bounds them too.
const aimTries = 6

// aim runs aimed attempts until ctx ends or aimTries were made, with a
// quiet interval before each; it returns the counts of faults applied.
func (s *schedule) aim(ctx context.Context) map[string]int {
	for try := 0; try < aimTries && sleep(ctx, between(s.r, s.cfg.Interval/2, s.cfg.Interval)); try++ {
		var evidence []string
		var err error
		s.rec(history.Event{Process: history.Nemesis, Type: history.Info, F: Aiming, Fault: s.cfg.Aim})
		switch s.cfg.Aim {
		case AimWallClock:
			evidence, err = s.aimWallClock(ctx)
		case AimNoFsync:
			evidence, err = s.aimPowerLossMajority(ctx)
		case AimLoneReplacement:
			evidence, err = s.aimLoneReplacement(ctx)
			if err == nil { // the lone node stays lone: one is enough
				s.exercised(evidence)
				<-ctx.Done()
				return s.counts
			}
		default:
			s.logf("nemesis: unknown aim %q", s.cfg.Aim)
			return s.counts
		}
		if err != nil {
			s.rec(history.Event{Process: history.Nemesis, Type: history.Info, F: Missed, Fault: s.cfg.Aim, Error: err.Error()})
			s.logf("nemesis: %s missed: %v", s.cfg.Aim, err)
			continue
		}
		s.exercised(evidence)
	}
	<-ctx.Done()
	return s.counts
}

func (s *schedule) exercised(evidence []string) {
	s.rec(history.Event{Process: history.Nemesis, Type: history.Info, F: Exercised, Fault: s.cfg.Aim, Targets: evidence})
	s.logf("nemesis: %s exercised: %v", s.cfg.Aim, evidence)
}

// lockView is the part of GET /v1/locks the aims read.
type lockView struct {
	Name    string `json:"name"`
	Holders []struct {
		Session string    `json:"session"`
		Token   uint64    `json:"token"`
		Expires time.Time `json:"expires"`
	} `json:"holders"`
	Waiters []json.RawMessage `json:"waiters"`
}

// locks reads node's lock table (GET /v1/locks, with the cluster's
// management token when ACLs are on).
func locks(ctx context.Context, c *compose.Cluster, node string) ([]lockView, error) {
	body, err := c.Call(ctx, node, "GET", "/v1/locks", "", http.StatusOK)
	if err != nil {
		return nil, err
	}
	var out []lockView
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("%s: GET /v1/locks: %w", node, err)
	}
	return out, nil
}

// freshGrant watches node's table until a lock is granted anew (its
// holder's token grows between two reads 50 ms apart) while others wait
// and the hold has a TTL: a hold that has just begun and is contended.
func freshGrant(ctx context.Context, c *compose.Cluster, node string, within time.Duration) (lockView, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	last := map[string]uint64{}
	for first := true; ; first = false {
		views, err := locks(ctx, c, node)
		if err != nil {
			return lockView{}, err
		}
		for _, v := range views {
			if len(v.Holders) != 1 {
				continue
			}
			h := v.Holders[0]
			if !first && h.Token > last[v.Name] && len(v.Waiters) > 0 && !h.Expires.IsZero() {
				return v, nil
			}
			last[v.Name] = h.Token
		}
		if !sleep(ctx, 50*time.Millisecond) {
			return lockView{}, errors.New("no fresh contended grant with a hold TTL on the leader")
		}
	}
}

// aimWallClock steps the leader's clock forward past the hold TTL right
// after a contended grant, keeps it stepped for 2 s (long enough for the
// next write to be stamped with it) and sets it back. Its evidence names
// the lock and the token of the hold the step was aimed at; the judge
// checks in the history that a second holder was granted while that one
// still held it.
func (s *schedule) aimWallClock(ctx context.Context) ([]string, error) {
	if s.cfg.HoldTTL <= 0 {
		return nil, errors.New("no hold TTL: a clock step ends no hold")
	}
	leader := currentLeader(ctx, s.c)
	if leader == "" {
		return nil, errors.New("no leader")
	}
	v, err := freshGrant(ctx, s.c, leader, 20*time.Second)
	if err != nil {
		return nil, err
	}
	step := WallClockStep(s.cfg.HoldTTL)
	ft := &fault{name: FaultClockBump, targets: []string{leader, step.String(), "aimed at " + v.Name}, undo: resetClock(s.c, leader)}
	if err := s.c.SetClock(ctx, leader, step); err != nil {
		return nil, fmt.Errorf("step %s's clock: %w", leader, err)
	}
	s.counts[ft.name]++
	s.record(history.Start, ft)
	sleep(ctx, 2*time.Second)
	s.lift(ft)
	// Setting the clock back froze the table's time until the wall clock
	// catches up with it; a step before then would move it less.
	sleep(ctx, step)
	return []string{v.Name, fmt.Sprint(v.Holders[0].Token), leader}, nil
}

// aimPowerLossMajority applies power-loss-majority, keeps it for its
// duration and undoes it (which brings the majority back first).
func (s *schedule) aimPowerLossMajority(ctx context.Context) ([]string, error) {
	ft, d := s.inject(ctx, []string{FaultPowerLossMajority}, map[string]bool{})
	if ft == nil {
		return nil, errors.New(FaultPowerLossMajority + " could not be applied")
	}
	sleep(ctx, d)
	s.lift(ft)
	return ft.targets, nil
}

// WallClockStep is how far AimWallClock steps the leader's clock: past
// the hold TTL, so that the hold it aims at ends at once, and by less
// than half a session TTL of twice as much (lockjepsen --ttl), so that
// no session ends with it: a holder whose session was lost is no holder
// the checkers can hold to account.
func WallClockStep(holdTTL time.Duration) time.Duration { return holdTTL + 5*time.Second }

// aimLoneReplacement replaces a follower by a lone node, waits until it
// is the only voter and leader of its own cluster, then kills and
// restarts the cluster's leader so that its clients fail over, and waits
// until the lone node has granted a lock while the cluster has a leader.
// The other nodes drop the lone node's packets (blackhole routes in their
// own network namespaces, installed before it starts, so that no
// AppendEntries of theirs can reach it first): raft would otherwise let
// the cluster's leader take it back as a follower, and no node would be
// alone. Clients reach it through its host port, which the routes leave
// alone.
func (s *schedule) aimLoneReplacement(ctx context.Context) ([]string, error) {
	leader := currentLeader(ctx, s.c)
	if leader == "" {
		return nil, errors.New("no leader")
	}
	others := without(s.c.Names(), leader)
	lone := others[s.r.Intn(len(others))]
	ft := &fault{name: FaultMemberReplace, targets: []string{lone, lone + " back fresh and alone, cut off from " + fmt.Sprint(others)}}
	s.counts[ft.name]++
	s.record(history.Start, ft)
	defer s.record(history.Stop, ft)
	if err := Kill(ctx, s.c, lone); err != nil {
		return nil, err
	}
	for _, n := range without(s.c.Names(), lone) {
		if err := dropFrom(ctx, s.c, n, lone); err != nil {
			return nil, errors.Join(err, s.giveBack(lone))
		}
	}
	if err := s.c.Replace(ctx, lone, s.cfg.replacementEnv()...); err != nil {
		return nil, fmt.Errorf("replace %s: %w", lone, err)
	}
	if err := waitAlone(ctx, s.c, lone); err != nil {
		return nil, err
	}
	if err := s.bounce(ctx, leader, lone); err != nil {
		return nil, err
	}
	return waitLoneGrant(ctx, s.c, lone)
}

// giveBack starts node again as it was and heals the routes, after an
// attempt that failed before node was replaced.
func (s *schedule) giveBack(node string) error {
	ctx, cancel := context.WithTimeout(context.Background(), RestartTimeout+10*time.Second)
	defer cancel()
	return errors.Join(Heal(ctx, s.c), Restart(ctx, s.c, node))
}

// dropFrom makes node drop every packet to peer: a blackhole route in
// node's network namespace (Heal and Recover remove it).
func dropFrom(ctx context.Context, c *compose.Cluster, node, peer string) error {
	pid, err := c.PID(ctx, node)
	if err != nil || pid == 0 {
		return fmt.Errorf("cut %s off from %s: not running (%v)", peer, node, err)
	}
	return nsRun(ctx, pid, "", "ip", "route", "replace", "blackhole", c.IP(peer)+"/32")
}

// bounce kills node and starts it again, recorded as a kill fault; its
// new network namespace drops the lone node's packets again.
func (s *schedule) bounce(ctx context.Context, node, lone string) error {
	ft := &fault{name: FaultKill, targets: []string{node}, undo: func(ctx context.Context) error {
		id, err := s.c.Container(ctx, node)
		if err == nil {
			_, err = compose.Docker(ctx, "start", id)
		}
		if err == nil { // before raft's first election timeout
			err = dropFrom(ctx, s.c, node, lone)
		}
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, RestartTimeout)
		defer cancel()
		return s.c.WaitNode(wctx, node)
	}}
	if err := Kill(ctx, s.c, node); err != nil {
		return fmt.Errorf("kill %s: %w", node, err)
	}
	s.counts[ft.name]++
	s.record(history.Start, ft)
	sleep(ctx, 2*time.Second)
	s.lift(ft)
	return nil
}

// waitAlone waits until node reports itself the leader of a
// configuration of one voter: itself.
func waitAlone(ctx context.Context, c *compose.Cluster, node string) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		st, err := c.Status(wctx, node)
		if err == nil && st.State == "leader" && compose.Voters(st) == 1 {
			return nil
		}
		if !sleep(wctx, 250*time.Millisecond) {
			return fmt.Errorf("%s never led a cluster of its own (last: %v, %v)", node, describe(st), err)
		}
	}
}

// waitLoneGrant waits until lone, still alone, holds a lock granted on
// its own table while another node knows a leader other than lone.
func waitLoneGrant(ctx context.Context, c *compose.Cluster, lone string) ([]string, error) {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		views, err := locks(wctx, c, lone)
		if err == nil && len(views) > 0 && len(views[0].Holders) > 0 {
			if other := otherLeader(wctx, c, lone); other != "" {
				if err := waitAlone(wctx, c, lone); err != nil {
					return nil, err
				}
				return []string{lone, "alone granted " + views[0].Name, "while the cluster's leader was " + other}, nil
			}
		}
		if !sleep(wctx, 250*time.Millisecond) {
			return nil, fmt.Errorf("the lone node %s granted nothing while the cluster had a leader (last read: %v)", lone, err)
		}
	}
}

// otherLeader is the leader a node other than lone knows, if that is
// not lone.
func otherLeader(ctx context.Context, c *compose.Cluster, lone string) string {
	for _, n := range without(c.Names(), lone) {
		if st, err := c.Status(ctx, n); err == nil && st.Leader.ID != "" && st.Leader.ID != c.ID(lone) {
			return n + " (" + st.Leader.ID + ")"
		}
	}
	return ""
}

// describe is a short account of a status for an error.
func describe(st *compose.Status) string {
	if st == nil {
		return "no status"
	}
	return fmt.Sprintf("%s with %d voters", st.State, compose.Voters(st))
}
