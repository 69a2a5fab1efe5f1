package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The null server is a ceiling only if it does a lock service's job: one
// holder per name, waiters granted in order on release, a timed-out wait
// refused, a release by someone else ignored.
func TestNullServerHandsOffInOrder(t *testing.T) {
	table := newNullTable()
	srv := httptest.NewServer(table.handler())
	defer srv.Close()
	post := func(path, body string) (int, string) {
		res, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, fmt.Sprintf("%v %v", out["status"], out["error"])
	}
	acquire := func(session, wait string) (int, string) {
		return post("/v1/acquire", fmt.Sprintf(`{"session":%q,"wait":%q,"locks":[{"name":"x","mode":"write"}]}`, session, wait))
	}
	release := func(session string) { post("/v1/release", fmt.Sprintf(`{"session":%q,"name":"x"}`, session)) }

	if code, got := acquire("a", "0s"); code != 200 || got != "granted <nil>" {
		t.Fatalf("a: %d %s", code, got)
	}
	if code, _ := acquire("b", "soon"); code != 400 {
		t.Fatalf("a wait that is no duration: %d, want 400", code)
	}
	if code, got := acquire("b", "20ms"); code != 409 || got != "<nil> timeout" {
		t.Fatalf("b while a holds: %d %s, want a timeout", code, got)
	}
	order := make(chan string, 2)
	for i, s := range []string{"b", "c"} {
		go func() {
			if code, got := acquire(s, "10s"); code == 200 && got == "granted <nil>" {
				order <- s
			}
		}()
		// b queues before c: wait for the table to hold its waiter (a
		// fixed sleep let c overtake b on a loaded machine).
		for deadline := time.Now().Add(10 * time.Second); queued(table, "x") < i+1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s not queued after 10s", s)
			}
		}
	}
	release("c") // not the holder: nothing changes
	release("a")
	if first := <-order; first != "b" {
		t.Fatalf("first granted %s, want b", first)
	}
	select {
	case s := <-order:
		t.Fatalf("%s granted while b holds", s)
	case <-time.After(50 * time.Millisecond):
	}
	release("b")
	if next := <-order; next != "c" {
		t.Fatalf("then %s, want c", next)
	}
}

// Waits that time out while releases hand the name on never leave two
// holders and never lose the name: at the end it is free.
func TestNullTableRaces(t *testing.T) {
	table := newNullTable()
	var holding atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprint("s", i)
			for j := range 3000 {
				wait := time.Duration(j%4) * 20 * time.Microsecond
				if table.take(context.Background(), "x", session, wait) != nil {
					continue
				}
				if holding.Add(1) != 1 {
					t.Error("two holders at once")
				}
				time.Sleep(time.Duration(j%2) * 10 * time.Microsecond)
				holding.Add(-1)
				table.free("x", session)
			}
		}()
	}
	wg.Wait()
	if err := table.take(context.Background(), "x", "last", 0); err != nil {
		t.Fatalf("the name was lost: %v (holders %v)", err, table.holders)
	}
}

// queued is how many wait in line for name.
func queued(t *nullTable, name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.waiters[name])
}
