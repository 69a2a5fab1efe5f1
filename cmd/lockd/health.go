package main

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/api/wire"
	"github.com/lockd/lockd/cmd/internal/clientflags"
)

// health is `lockd health`: exit 0 when the node at --addr answers
// /v1/status and knows a leader. The Docker image (FROM scratch, no curl)
// uses it as its HEALTHCHECK.
func health(args []string) int {
	fs := flag.NewFlagSet("lockd health", flag.ContinueOnError)
	var n nodeConn
	n.register(fs)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	quiet := fs.Bool("quiet", false, "print nothing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var st wire.StatusResponse
	err := n.call(http.MethodGet, "/v1/status", *timeout, &st)
	switch {
	case err != nil:
		say(*quiet, "unhealthy: %v\n", err)
		return 1
	case st.Diverged != "":
		say(*quiet, "unhealthy: node %s has diverged from the leader and serves nothing: %s\n", st.NodeID, st.Diverged)
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
	var n nodeConn
	n.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// A node that has no leader to take the request (an election: the
	// last node to leave may be the one that led) answers 503 not_applied:
	// nothing was done, so it is sent again, as the clients do.
	deadline := time.Now().Add(leaveWait)
	for {
		err := n.call(http.MethodPost, "/v1/agent/leave", 10*time.Second, nil)
		var ae *answerError
		if errors.As(err, &ae) && ae.notApplied && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockd leave:", err)
			return 1
		}
		break
	}
	fmt.Println("leaving; the node stops once the cluster has removed it")
	return 0
}

func say(quiet bool, format string, args ...any) {
	if !quiet {
		fmt.Printf(format, args...)
	}
}

// nodeConn is how health and leave reach a node: --addr and the TLS
// flags.
type nodeConn struct {
	addr  string
	tls   clientflags.TLS
	token clientflags.Token
}

// nodeTLSEnv names the node's own TLS files (its --tls-ca, --tls-cert and
// --tls-key). The Docker HEALTHCHECK runs `lockd health --quiet` without
// arguments inside the container, so health and leave use these files when
// given no TLS flag; a node certificate is also a client certificate.
var nodeTLSEnv = struct{ ca, cert, key string }{"LOCKD_TLS_CA", "LOCKD_TLS_CERT", "LOCKD_TLS_KEY"}

// register adds --addr, --ca-cert, --client-cert and --client-key to fs.
func (n *nodeConn) register(fs *flag.FlagSet) {
	fs.StringVar(&n.addr, "addr", "127.0.0.1:7001", "HTTP address of the node")
	n.tls.Register(fs)
	n.token.Register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "Without --ca-cert, --client-cert and --client-key (and their env), the node's\n"+
			"own files in $%s, $%s and $%s are used, if set. On a cluster with --acl,\n"+
			"leave needs that certificate, an operator's client certificate or a management token.\n",
			nodeTLSEnv.ca, nodeTLSEnv.cert, nodeTLSEnv.key)
	}
}

// tlsConfig is the TLS config of the flags, else of the node's own files;
// nil for plain HTTP.
func (n *nodeConn) tlsConfig() (*tls.Config, error) {
	if n.tls.Set() {
		return n.tls.Config()
	}
	return client.TLSConfig(os.Getenv(nodeTLSEnv.ca), os.Getenv(nodeTLSEnv.cert), os.Getenv(nodeTLSEnv.key))
}

// call does one request to the node and decodes a 2xx JSON answer into
// out.
func (n *nodeConn) call(method, path string, timeout time.Duration, out any) error {
	cfg, err := n.tlsConfig()
	if err != nil {
		return err
	}
	hc, scheme := &http.Client{Timeout: timeout}, "http"
	if cfg != nil {
		hc.Transport, scheme = &http.Transport{TLSClientConfig: cfg}, "https"
	}
	req, err := http.NewRequest(method, scheme+"://"+n.addr+path, nil)
	if err != nil {
		return err
	}
	if secret := n.token.Secret(); secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		ae := &answerError{what: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, body)}
		var e wire.ErrorBody
		if json.Unmarshal(body, &e) == nil && resp.StatusCode == http.StatusServiceUnavailable {
			ae.notApplied = e.Error.NotApplied
		}
		return ae
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return nil
}

// leaveWait bounds how long `lockd leave` sends its request again while
// the node answers that nothing was done (no leader to take it).
const leaveWait = 30 * time.Second

// answerError is a node's non-2xx answer.
type answerError struct {
	what       string
	notApplied bool // a 503 that says the node did nothing
}

func (e *answerError) Error() string { return e.what }
