package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockd/lockd/api"
)

// TestLimitAndCORSFlags: the node-local limits have their documented
// defaults, take other values, refuse nonsense; --cors-origin takes exact
// origins only and is empty by default.
func TestLimitAndCORSFlags(t *testing.T) {
	c, err := parseFlags([]string{"--dev"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxWaits != 4096 || c.MaxStreams != 256 || c.MaxConns != 4096 || c.MaxStreamDuration != 10*time.Minute || len(c.Origins) != 0 ||
		c.MaxLeaderWaits != 2048 {
		t.Fatalf("defaults: waits %d streams %d conns %d duration %v origins %q",
			c.MaxWaits, c.MaxStreams, c.MaxConns, c.MaxStreamDuration, c.Origins)
	}
	if c.MaxWaits != api.DefaultMaxWaits || c.MaxStreams != api.DefaultMaxStreams || c.MaxConns != api.DefaultMaxConns {
		t.Fatal("the flags' defaults are not the api's")
	}
	c, err = parseFlags(strings.Fields("--dev --max-waits 10 --max-streams 2 --max-conns 50 --max-stream-duration 30s --max-leader-waits 7 " +
		"--cors-origin https://ops.example.com,http://localhost:3000"))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxWaits != 10 || c.MaxStreams != 2 || c.MaxConns != 50 || c.MaxStreamDuration != 30*time.Second || c.MaxLeaderWaits != 7 ||
		!slices.Equal(c.Origins, []string{"https://ops.example.com", "http://localhost:3000"}) {
		t.Fatalf("set: %+v", c)
	}
	for _, bad := range []string{"--max-waits 0", "--max-leader-waits 0", "--max-streams -1", "--max-conns 0", "--max-stream-duration 0s",
		"--cors-origin *", "--cors-origin https://ops.example.com/", "--cors-origin ops.example.com"} {
		if _, err := parseFlags(strings.Fields("--dev " + bad)); err == nil {
			t.Errorf("parseFlags(--dev %s) accepted", bad)
		}
	}
}
