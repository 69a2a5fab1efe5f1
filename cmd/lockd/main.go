// Command lockd runs one node of a lockd cluster: the raft node, gossip
// membership and the HTTP API. `lockd health` and `lockd leave` talk to a
// running node (the first is the Docker health check); `lockd tls` makes
// a cluster's certificates and `lockd keygen` its gossip key.
//
// Usage:
//
//	lockd --node-id n1 --data-dir /var/lib/lockd \
//	      --http-addr 127.0.0.1:7001 --raft-addr 127.0.0.1:7101 --gossip-addr 127.0.0.1:7201 \
//	      --join 127.0.0.1:7202,127.0.0.1:7203 --bootstrap-expect 3
//	lockd --dev
//	lockd health [--addr A] [--ca-cert F] [--client-cert F --client-key F] [--quiet]
//	lockd leave  [--addr A] [--ca-cert F] [--client-cert F --client-key F] [--token S]  (token: LOCKD_TOKEN)
//	lockd tls ca   --out DIR
//	lockd tls cert --ca DIR --name n1 [--ip 10.0.0.1,...] [--dns host,...] [--client] --out DIR
//	lockd tls init --out DIR --node n1=10.0.0.1 ... [--client NAME] [--gossip-key]
//	lockd keygen
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 {
		switch args[0] {
		case "health":
			os.Exit(health(args[1:]))
		case "leave":
			os.Exit(leave(args[1:]))
		case "tls":
			os.Exit(tlsMain(args[1:], os.Stdout, os.Stderr))
		case "keygen":
			os.Exit(keygen(args[1:], os.Stdout, os.Stderr))
		}
	}
	cfg, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockd:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "lockd:", err)
		os.Exit(1)
	}
}
