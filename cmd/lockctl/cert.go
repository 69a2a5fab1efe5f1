package main

import (
	"context"
	"fmt"

	"github.com/lockd/lockd/api/client"
)

func runCertDeny(e *env, args []string) int {
	fs := e.flags(true)
	reason := fs.String("reason", "", "why the certificate is denied (`R`, kept with the serial)")
	e.note(fs, `
Puts a certificate's SERIAL (hex, as "openssl x509 -noout -serial" prints it;
colons allowed) on the cluster's deny list: every node then refuses that
certificate on every port, open connections included. For one leaked client
or node certificate; a leaked CA key needs the CA rotated instead
(docs/security.md). Needs a management token or an operator's client
certificate. Denying a serial twice is no error.
`)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "want exactly one SERIAL")
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		serial, err := c.DenyCert(ctx, fs.Arg(0), *reason)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			return printJSON(e.stdout, map[string]string{"denied": serial})
		}
		fmt.Fprintf(e.stdout, "denied certificate serial %s\n", serial)
		return exitOK
	})
}

func runCertDenied(e *env, args []string) int {
	fs := e.flags(true)
	e.note(fs, "\nLists the cluster's denied certificate serials. Needs a management token or an\noperator's client certificate.\n")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return e.usageErr(fs, "want no arguments")
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		denied, err := c.DeniedCerts(ctx)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			return printJSON(e.stdout, denied)
		}
		w := table(e.stdout)
		fmt.Fprintln(w, "SERIAL\tINDEX\tREASON")
		for _, d := range denied {
			fmt.Fprintf(w, "%s\t%d\t%s\n", d.Serial, d.Index, d.Reason)
		}
		_ = w.Flush()
		return exitOK
	})
}
