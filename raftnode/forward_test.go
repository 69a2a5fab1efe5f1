package raftnode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lockd/lockd/lockstate"
)

// TestAnswerOverTheLimitIsNotAnUnknownOutcome: when the leader's answer to
// a forwarded command is over the reply limit, the follower learns that
// the command was applied and its answer lost (ErrAnswerLost), never an
// unknown outcome that a caller would repeat (a repeated close finds no
// session and reports nothing released).
func TestAnswerOverTheLimitIsNotAnUnknownOutcome(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	l := c.leader()
	f := c.followers(l)[0].get()
	s := createSession(t, f, time.Minute)
	for i := range 20 {
		acquire(t, f, s, fmt.Sprintf("big/%02d-%s", i, strings.Repeat("x", 100)), fmt.Sprintf("big-%02d", i), 0, 0)
	}
	old := maxReplyBody.Load()
	maxReplyBody.Store(1024) // the close lists 20 names of 100+ bytes
	defer maxReplyBody.Store(old)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := f.Propose(ctx, &lockstate.CloseSession{Session: s})
	if !errors.Is(err, ErrAnswerLost) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("close with an answer over the limit: %v, want ErrAnswerLost only", err)
	}
	if !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("the error does not say why: %v", err)
	}
	c.converged()
	if hasSession(l.get(), s) {
		t.Fatal("the session is still open: the close was not applied")
	}
}

// TestAnswerCutOffAfterOK: a 200 whose body breaks off means the leader
// applied the command: ErrAnswerLost, not an unknown outcome; a read
// whose answer breaks off may simply be retried.
func TestAnswerCutOffAfterOK(t *testing.T) {
	full, err := msgpack.Marshal(&wireReply{Index: 7, Result: &lockstate.Result{Released: []string{strings.Repeat("n", 4096)}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", fmt.Sprint(len(full)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(full[:len(full)/2])
		panic(http.ErrAbortHandler) // the connection breaks mid-answer
	}))
	defer srv.Close()
	n := &Node{client: srv.Client(), timing: newTiming(testTiming)}
	addr := strings.TrimPrefix(srv.URL, "http://")

	_, err = n.forward(context.Background(), addr, pathPropose, []byte{0}, true)
	if !errors.Is(err, ErrAnswerLost) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("propose answered 200 and cut off: %v, want ErrAnswerLost", err)
	}
	_, err = n.forward(context.Background(), addr, pathReadIndex, nil, false)
	if !retryable(err) {
		t.Fatalf("read-index answered 200 and cut off: %v, want a retryable error", err)
	}
}

// TestForwardBurst: a burst of proposals through one follower, far more
// at once than the leader admits connections in their handshake from one
// host (maxPendingPerHost), all commit: the follower queues them on the
// connections it may open instead of dialling one per proposal and having
// the extra ones closed, which it could only report as unknown outcomes.
//
// An election during the burst (under load, or provoked) fails proposals
// for its own reasons: a burst that saw the term move is sent again, for
// up to a minute; one that failed within a term fails the test at once.
func TestForwardBurst(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	deadline := time.Now().Add(time.Minute)
	for attempt := 1; ; attempt++ {
		l := c.leader()
		f := c.follower(l).get()
		term := l.get().Status().Term
		err := forwardBurst(f, 4*maxPendingPerHost)
		if err == nil {
			return
		}
		// A leader that lost its leadership may not have been replaced
		// yet: the next ready one has a later term.
		if now := c.leader().get().Status().Term; now == term || time.Now().After(deadline) {
			t.Fatalf("a proposal in the burst (attempt %d, term %d, now %d) failed: %v", attempt, term, now, err)
		}
		t.Logf("an election during burst %d: %v", attempt, err)
	}
}

// forwardBurst proposes burst sessions through f at once and returns the
// first error.
func forwardBurst(f *Node, burst int) error {
	start := make(chan struct{})
	errs := make(chan error, burst)
	var wg sync.WaitGroup
	for range burst {
		wg.Go(func() {
			<-start
			_, _, err := f.Propose(context.Background(), &lockstate.CreateSession{TTL: time.Minute})
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
