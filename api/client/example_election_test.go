package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/lockd/lockd/api/client"
)

// Leader election: replicas of a service campaign with their address as
// the value; the one elected serves, the others wait as candidates. A
// client routes each request to the leader Observe delivered last. When
// the leader stops (here: replica-a is shut down), the next candidate is
// elected with a larger term, and the client follows it.
func Example_leaderElection() {
	ctx := context.Background()
	c, err := client.New() // the cluster LOCKD_ADDR names; LOCKD_TOKEN and LOCKD_CACERT as it needs
	if err != nil {
		log.Fatal(err)
	}
	ctxA, stopA := context.WithCancel(ctx)
	doneA := goReplica(ctxA, c, "replica-a")

	// The client: follow the leader, send each request to it.
	octx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	leaders := c.Election("svc/greeter").Observe(octx)
	first := <-leaders
	fmt.Println(ask(first))

	ctxB, stopB := context.WithCancel(ctx)
	doneB := goReplica(ctxB, c, "replica-b") // queues behind replica-a
	stopA()
	if err := <-doneA; err != nil {
		log.Fatal(err)
	}
	second := <-leaders
	fmt.Println(ask(second))
	fmt.Println("a later term:", second.Token > first.Token)

	stopB()
	if err := <-doneB; err != nil {
		log.Fatal(err)
	}
	// Output:
	// hello from replica-a
	// hello from replica-b
	// a later term: true
}

// goReplica runs replica in the background; its error comes on the
// channel when it ends.
func goReplica(ctx context.Context, c *client.Client, id string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- replica(ctx, c, id) }()
	return done
}

// replica is one replica of the service: it campaigns for svc/greeter
// with its address as the value and serves HTTP only while it leads,
// until it loses the leadership (its session lost, an operator's revoke)
// or ctx ends; then it stops serving before it resigns, so that two
// replicas never serve at once.
func replica(ctx context.Context, c *client.Client, id string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	s, err := c.NewSession(ctx, 10*time.Second, client.WithSessionName(id))
	if err != nil {
		return err
	}
	defer func() { // a bounded close: an outage must not hold up the exit
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Close(ctx)
	}()
	l, err := s.Election("svc/greeter").Campaign(ctx, "http://"+ln.Addr().String())
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while a candidate
		}
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Writes to shared resources would carry l.Token, the term, as
		// their fencing token.
		fmt.Fprintf(w, "hello from %s", id)
	})}
	go srv.Serve(ln)
	select {
	case <-l.Lost():
		log.Printf("%s: leadership lost: %v", id, l.LostErr())
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	return l.Resign(sctx)
}

// ask sends one request to the leader, at the address it proclaims.
func ask(leader client.ElectionLeader) string {
	resp, err := http.Get(leader.Value)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
