package client_test

// The examples are programs of a user of the client: each talks to the
// cluster that LOCKD_ADDR names (with LOCKD_TOKEN and LOCKD_CACERT when
// that cluster needs them), such as a dev node started with
//
//	go run ./cmd/lockd --dev     # LOCKD_ADDR=127.0.0.1:7001
//
// Their test run (go test ./api/client) starts a dev node of its own and
// points LOCKD_ADDR at it (TestMain).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/lockd/lockd/api/client"
)

// A mutex: one holder at a time, kept while the session lives.
func Example_mutex() {
	ctx := context.Background()
	c, err := client.New() // the cluster LOCKD_ADDR names; LOCKD_TOKEN and LOCKD_CACERT as it needs
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.NewSession(ctx, 10*time.Second, client.WithSessionName("nightly-backup"))
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		// A bounded close: in an outage it must not hold up the exit. (A
		// session already lost sends nothing: the cluster expires it.)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Close(ctx)
	}()

	g, err := s.Lock(ctx, "jobs/backup")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("locked", g.Names())

	// Another session cannot have it right now.
	other, err := c.NewSession(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		other.Close(ctx)
	}()
	_, err = other.TryLock(ctx, "jobs/backup")
	fmt.Println("other session:", errors.Is(err, client.ErrLocked))

	// Stop working as soon as the session is lost.
	select {
	case <-s.Done():
		log.Fatal("lost the lock: ", s.Err())
	default:
	}
	if err := s.Unlock(ctx, "jobs/backup"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("unlocked")
	// Output:
	// locked [jobs/backup]
	// other session: true
	// unlocked
}

// A semaphore: at most limit permits are held at once.
func Example_semaphore() {
	ctx := context.Background()
	c, err := client.New() // the cluster LOCKD_ADDR names; LOCKD_TOKEN and LOCKD_CACERT as it needs
	if err != nil {
		log.Fatal(err)
	}
	const limit = 2
	var sessions []*client.Session
	for range 3 {
		s, err := c.NewSession(ctx, 10*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		defer func() { // a bounded close: an outage must not hold up the exit
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			s.Close(ctx)
		}()
		sessions = append(sessions, s)
	}
	permit := []client.LockSpec{{Name: "pool/gpu", Weight: 1, Limit: limit}}
	for i, s := range sessions {
		// Give up quickly when no permit is free: the server waits at
		// most 300 ms and then answers ErrTimeout, nothing held. (A ctx
		// of 300 ms would also bound the round trip, so a slow one could
		// miss a free permit.)
		_, err := s.Acquire(ctx, permit, client.Wait(300*time.Millisecond))
		if err != nil && !errors.Is(err, client.ErrTimeout) {
			log.Fatal(err)
		}
		fmt.Printf("job %d: granted=%v\n", i, err == nil)
	}
	// Output:
	// job 0: granted=true
	// job 1: granted=true
	// job 2: granted=false
}

// Fencing tokens: a resource accepts writes only from the current holder.
func Example_fencingToken() {
	ctx := context.Background()
	c, err := client.New() // the cluster LOCKD_ADDR names; LOCKD_TOKEN and LOCKD_CACERT as it needs
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.NewSession(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { // a bounded close: an outage must not hold up the exit
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Close(ctx)
	}()

	g, err := s.Lock(ctx, "db/orders")
	if err != nil {
		log.Fatal(err)
	}
	// The storage layer checks the token the writer presents (a lock on
	// db/orders covers db/orders/42 too). On its hot path it bounds the
	// check (time to fail over from a dead node, about 1s, and more), and
	// refuses the writer if the cluster cannot answer in time.
	check := func(token uint64) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		valid, _, err := c.Check(ctx, "db/orders/42", token)
		return valid, err
	}
	valid, err := check(g.Token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token valid while held:", valid)

	if err := s.Unlock(ctx, "db/orders"); err != nil {
		log.Fatal(err)
	}
	valid, err = check(g.Token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("token valid after unlock:", valid)
	// Output:
	// token valid while held: true
	// token valid after unlock: false
}

// Multi-lock: a majority of three replicas, granted atomically.
func Example_multiLock() {
	ctx := context.Background()
	c, err := client.New() // the cluster LOCKD_ADDR names; LOCKD_TOKEN and LOCKD_CACERT as it needs
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.NewSession(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { // a bounded close: an outage must not hold up the exit
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Close(ctx)
	}()

	g, err := s.Acquire(ctx, []client.LockSpec{
		{Name: "replica/a"}, {Name: "replica/b"}, {Name: "replica/c"},
	}, client.RequireMajority)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("granted", len(g.Locks), "of 3:", g.Names())
	if err := s.Release(ctx, g); err != nil {
		log.Fatal(err)
	}
	// Output:
	// granted 2 of 3: [replica/a replica/b]
}
