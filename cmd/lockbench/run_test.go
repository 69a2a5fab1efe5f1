package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTokenIsSent: with --token every request carries it as a bearer
// token, and a refusal (401) fails the session creation, naming it.
func TestTokenIsSent(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"code":"unauthorized","message":"no token"}}`)
			return
		}
		fmt.Fprint(w, `{"id":"abc"}`)
	}))
	defer srv.Close()
	hc := api{token: "s3cret"}.client(1, 5*time.Second)
	if id, err := createSession(hc, srv.URL); err != nil || id != "abc" {
		t.Fatalf("with a token: %q, %v", id, err)
	}
	deleteSession(hc, srv.URL, "abc")
	_, err := createSession(api{}.client(1, 5*time.Second), srv.URL)
	if err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("without a token: %v, want unauthorized", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 || seen[0] != "Bearer s3cret" || seen[1] != "Bearer s3cret" || seen[2] != "" {
		t.Fatalf("Authorization headers %q", seen)
	}
}
