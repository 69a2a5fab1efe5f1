package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/lockd/lockd/api"
)

// health is `lockd health`: exit 0 when the node at --addr answers
// /v1/status and knows a leader. The Docker image (FROM scratch, no curl)
// uses it as its HEALTHCHECK.
func health(args []string) int {
	fs := flag.NewFlagSet("lockd health", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7001", "HTTP address of the node")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	quiet := fs.Bool("quiet", false, "print nothing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var st api.StatusResponse
	err := call(http.MethodGet, *addr, "/v1/status", *timeout, &st)
	switch {
	case err != nil:
		say(*quiet, "unhealthy: %v\n", err)
		return 1
	case st.Leader.ID == "":
		say(*quiet, "unhealthy: node %s is %s and knows no leader\n", st.NodeID, st.State)
		return 1
	}
	say(*quiet, "ok: node %s is %s, leader %s, applied index %d\n", st.NodeID, st.State, st.Leader.ID, st.AppliedIndex)
	return 0
}

// leave is `lockd leave`: ask the node at --addr to leave the cluster for
// good (it is removed from the raft configuration) and stop.
func leave(args []string) int {
	fs := flag.NewFlagSet("lockd leave", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:7001", "HTTP address of the node")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := call(http.MethodPost, *addr, "/v1/agent/leave", 10*time.Second, nil); err != nil {
		fmt.Fprintln(os.Stderr, "lockd leave:", err)
		return 1
	}
	fmt.Println("leaving; the node stops once the cluster has removed it")
	return 0
}

func say(quiet bool, format string, args ...any) {
	if !quiet {
		fmt.Printf(format, args...)
	}
}

// call does one request and decodes a 2xx JSON answer into out.
func call(method, addr, path string, timeout time.Duration, out any) error {
	req, err := http.NewRequest(method, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return nil
}
