package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The null server is a ceiling only if it does a lock service's job: one
// holder per name, waiters granted in order on release, a timed-out wait
// refused, a release by someone else ignored.
func TestNullServerHandsOffInOrder(t *testing.T) {
	srv := httptest.NewServer(nullHandler())
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
	if code, got := acquire("b", "20ms"); code != 409 || got != "<nil> timeout" {
		t.Fatalf("b while a holds: %d %s, want a timeout", code, got)
	}
	order := make(chan string, 2)
	for _, s := range []string{"b", "c"} {
		go func() {
			if code, got := acquire(s, "10s"); code == 200 && got == "granted <nil>" {
				order <- s
			}
		}()
		time.Sleep(50 * time.Millisecond) // b queues before c
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
