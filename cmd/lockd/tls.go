package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockd/lockd/raftnode/certs"
)

const tlsUsage = `usage: lockd tls ca|cert|init [flags]

  lockd tls ca --out DIR
      A new cluster CA: DIR/ca.pem and DIR/ca-key.pem (ECDSA P-256, valid
      10 years). Nodes and clients need only ca.pem; keep ca-key.pem safe,
      it signs every certificate of the cluster.

  lockd tls cert --ca DIR --name NAME [--ip IP,...] [--dns HOST,...] --out DIR
      A node certificate signed by the CA in the --ca directory, written
      to NAME.pem and NAME-key.pem in the --out directory: for both ends
      of TLS (server and client), valid 1 year. NAME is the node id
      (--node-id). 127.0.0.1, ::1, localhost and NAME are always in; --ip
      and --dns add the addresses other nodes and clients reach it at.

  lockd tls cert --ca DIR --client --name NAME --out DIR
      A client certificate (client use only, valid 1 year) for the HTTP API
      with --tls-client-auth. It cannot join the cluster.

  lockd tls init --out DIR --node NAME[=IP,...] ... [--client NAME] [--gossip-key]
      Everything a cluster needs, in one directory, made only where it is
      missing: the CA (when DIR has none), a node certificate per --node,
      a client certificate per --client, and with --gossip-key a gossip
      key in DIR/gossip.key. Running it again adds what is new and keeps
      the rest: the one-shot init service of docker-compose.yml.

Existing files are never overwritten; keys are written 0600 and new
directories 0700. Run "lockd tls ca --help" or "lockd tls cert --help"
for the flags.
`

// tlsMain is `lockd tls`: it makes the certificates of a cluster.
func tlsMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, tlsUsage)
		return 2
	}
	switch args[0] {
	case "ca":
		return tlsCA(args[1:], stdout, stderr)
	case "cert":
		return tlsCert(args[1:], stdout, stderr)
	case "init":
		return tlsInit(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, tlsUsage)
		return 0
	}
	fmt.Fprintf(stderr, "lockd tls: unknown subcommand %q\n\n%s", args[0], tlsUsage)
	return 2
}

// tlsCA is `lockd tls ca`.
func tlsCA(args []string, stdout, stderr io.Writer) int {
	fs := subcommandFlags("lockd tls ca", "--out DIR",
		"Makes a new cluster CA: DIR/ca.pem and DIR/ca-key.pem (ECDSA P-256, valid 10 years).", stderr)
	out := fs.String("out", "", "directory to write ca.pem and ca-key.pem to (required)")
	if code, done := parseSubcommand(fs, args); done {
		return code
	}
	if *out == "" {
		return usageError(fs, "--out is required")
	}
	ca, err := certs.NewAuthority()
	if err == nil {
		err = ca.WriteFiles(*out)
	}
	if err != nil {
		fmt.Fprintln(stderr, "lockd tls ca:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(*out, "ca.pem"), filepath.Join(*out, "ca-key.pem"))
	return 0
}

// certRequest is what `lockd tls cert` was asked for.
type certRequest struct {
	caDir, name, out string
	client           bool
	ips              []net.IP
	dnsNames         []string
}

// tlsCert is `lockd tls cert`.
func tlsCert(args []string, stdout, stderr io.Writer) int {
	fs := subcommandFlags("lockd tls cert", "--ca DIR --name NAME [--ip IP,...] [--dns HOST,...] [--client] --out DIR",
		"Issues a node certificate (server and client use), or with --client a client certificate\n"+
			"for the HTTP API, valid 1 year: NAME.pem and NAME-key.pem in the --out directory.", stderr)
	var r certRequest
	fs.StringVar(&r.caDir, "ca", "", "directory of the CA, with ca.pem and ca-key.pem (required)")
	fs.StringVar(&r.name, "name", "", "node id, or the client's name with --client: the common name and the file names (required)")
	ips := fs.String("ip", "", "comma-separated IP addresses the node is reached at, besides 127.0.0.1 and ::1")
	dns := fs.String("dns", "", "comma-separated host names the node is reached at, besides NAME and localhost")
	fs.BoolVar(&r.client, "client", false, "a client certificate for the HTTP API instead of a node certificate")
	fs.StringVar(&r.out, "out", "", "directory to write NAME.pem and NAME-key.pem to (required)")
	if code, done := parseSubcommand(fs, args); done {
		return code
	}
	r.dnsNames = splitList(*dns)
	for _, s := range splitList(*ips) {
		ip := net.ParseIP(s)
		if ip == nil {
			return usageError(fs, fmt.Sprintf("--ip: %q is not an IP address", s))
		}
		r.ips = append(r.ips, ip)
	}
	switch {
	case r.caDir == "" || r.name == "" || r.out == "":
		return usageError(fs, "--ca, --name and --out are required")
	case r.client && (len(r.ips) > 0 || len(r.dnsNames) > 0):
		return usageError(fs, "--ip and --dns are for node certificates, not with --client")
	}
	certFile, keyFile, err := r.issue()
	if err != nil {
		fmt.Fprintln(stderr, "lockd tls cert:", err)
		return 1
	}
	kind := "node"
	if r.client {
		kind = "client"
	}
	fmt.Fprintf(stdout, "wrote %s and %s (%s certificate %q)\n", certFile, keyFile, kind, r.name)
	return 0
}

// issue signs the certificate r asks for and writes it.
func (r certRequest) issue() (certFile, keyFile string, err error) {
	ca, err := certs.LoadAuthority(r.caDir)
	if err != nil {
		return "", "", err
	}
	var certPEM, keyPEM []byte
	if r.client {
		certPEM, keyPEM, err = ca.Client(r.name)
	} else {
		certPEM, keyPEM, err = ca.Node(r.name, r.ips, r.dnsNames)
	}
	if err == nil {
		err = certs.WriteKeyPair(r.out, r.name, certPEM, keyPEM)
	}
	return filepath.Join(r.out, r.name+".pem"), filepath.Join(r.out, r.name+"-key.pem"), err
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// tlsInit is `lockd tls init`.
func tlsInit(args []string, stdout, stderr io.Writer) int {
	fs := subcommandFlags("lockd tls init", "--out DIR --node NAME[=IP,...] ... [--client NAME] [--gossip-key]",
		"Makes what is missing of a cluster's CA, node and client certificates and gossip key in DIR.", stderr)
	out := fs.String("out", "", "directory of the cluster's files (required)")
	var nodes, clients listFlag
	fs.Var(&nodes, "node", "a node certificate: NAME, or NAME=IP,IP to add the addresses it is reached at (repeatable)")
	fs.Var(&clients, "client", "a client certificate NAME (repeatable)")
	gossip := fs.Bool("gossip-key", false, "also a gossip key in DIR/gossip.key")
	if code, done := parseSubcommand(fs, args); done {
		return code
	}
	if *out == "" {
		return usageError(fs, "--out is required")
	}
	requests, err := initRequests(*out, nodes, clients)
	if err != nil {
		return usageError(fs, err.Error())
	}
	if err := initCluster(*out, requests, *gossip, stdout); err != nil {
		fmt.Fprintln(stderr, "lockd tls init:", err)
		return 1
	}
	return 0
}

// initRequests turns --node and --client values into certificate requests.
func initRequests(dir string, nodes, clients []string) ([]certRequest, error) {
	var requests []certRequest
	for _, n := range nodes {
		name, addrs, _ := strings.Cut(n, "=")
		r := certRequest{caDir: dir, name: name, out: dir}
		for _, s := range splitList(addrs) {
			ip := net.ParseIP(s)
			if ip == nil {
				return nil, fmt.Errorf("--node %s: %q is not an IP address", n, s)
			}
			r.ips = append(r.ips, ip)
		}
		requests = append(requests, r)
	}
	for _, c := range clients {
		requests = append(requests, certRequest{caDir: dir, name: c, out: dir, client: true})
	}
	return requests, nil
}

// initCluster makes what is missing in dir.
func initCluster(dir string, requests []certRequest, gossip bool, stdout io.Writer) error {
	if !exists(filepath.Join(dir, "ca.pem")) {
		ca, err := certs.NewAuthority()
		if err == nil {
			err = ca.WriteFiles(dir)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote a new CA in %s\n", dir)
	}
	for _, r := range requests {
		if exists(filepath.Join(dir, r.name+".pem")) {
			continue
		}
		if _, _, err := r.issue(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s.pem and %s-key.pem\n", r.name, r.name)
	}
	keyFile := filepath.Join(dir, "gossip.key")
	if !gossip || exists(keyFile) {
		return nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", keyFile)
	return nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// keygen is `lockd keygen`: it prints a new gossip encryption key for
// --gossip-key, 32 random bytes (AES-256) in base64.
func keygen(args []string, stdout, stderr io.Writer) int {
	fs := subcommandFlags("lockd keygen", "",
		"Prints a new gossip encryption key for --gossip-key: 32 random bytes in base64.", stderr)
	if code, done := parseSubcommand(fs, args); done {
		return code
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		fmt.Fprintln(stderr, "lockd keygen:", err)
		return 1
	}
	fmt.Fprintln(stdout, base64.StdEncoding.EncodeToString(key))
	return 0
}

// subcommandFlags is the flag set of a subcommand: its usage is
// "name synopsis", what it does, and its flags; errors and help go to
// stderr.
func subcommandFlags(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n\n%s\n", strings.TrimSpace(name+" "+synopsis), about)
		fs.PrintDefaults()
	}
	return fs
}

// parseSubcommand parses args; done says the command is over and must
// exit with code: 0 after --help, 2 on a usage error (already printed).
func parseSubcommand(fs *flag.FlagSet, args []string) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	case err != nil:
		return 2, true
	case fs.NArg() > 0:
		return usageError(fs, fmt.Sprintf("unexpected arguments %q", fs.Args())), true
	}
	return 0, false
}

// usageError prints msg and the usage of fs and returns the exit code of
// a usage error.
func usageError(fs *flag.FlagSet, msg string) int {
	fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), msg)
	fs.Usage()
	return 2
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}
