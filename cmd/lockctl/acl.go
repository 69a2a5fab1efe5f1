package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/lockd/lockd/api/client"
)

// runRevoke is "lockctl revoke NAME": an operator releases every hold on
// NAME (docs/security.md, Revocation).
func runRevoke(e *env, args []string) int {
	fs := e.flags(true)
	e.note(fs, `
Releases every hold on NAME at once, whoever holds it; needs a token with
admin on NAME. The holders' fencing tokens stop being valid, waiters are
granted in their order, and each holder learns it lost the lock on its next
keepalive ("lockctl lock" stops its command and exits 74). A revoke whose
outcome is unknown is not resent.
`)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "want exactly one NAME")
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		revoked, err := c.Revoke(ctx, fs.Arg(0))
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			return printJSON(e.stdout, map[string]any{"revoked": revoked})
		}
		if len(revoked) == 0 {
			fmt.Fprintf(e.stdout, "nobody held %s\n", fs.Arg(0))
		}
		for _, r := range revoked {
			fmt.Fprintf(e.stdout, "revoked %s from %s (token %d)\n", r.Name, sessionText(r.Session), r.Token)
		}
		return exitOK
	})
}

func runBootstrap(e *env, args []string) int {
	fs := e.flags(true)
	e.note(fs, `
Makes the cluster's first management token (admin on every name) and prints
its secret, once: keep it like a root password (export LOCKD_TOKEN=...).
Works once per cluster; afterwards exits 77.
`)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		t, err := c.BootstrapACL(ctx)
		if err != nil {
			return e.fail(err)
		}
		return e.printToken(t)
	})
}

// ruleFlag collects --rule PREFIX=ACCESS.
type ruleFlag []client.Rule

func (r *ruleFlag) String() string { return fmt.Sprint(*r) }

func (r *ruleFlag) Set(s string) error {
	prefix, access, ok := strings.Cut(s, "=")
	if i := strings.LastIndex(s, "="); ok && i >= 0 {
		prefix, access = s[:i], s[i+1:] // a prefix may hold '='; the access never does
	}
	switch access {
	case "read", "write", "admin":
	default:
		return fmt.Errorf("%q: want PREFIX=read, PREFIX=write or PREFIX=admin", s)
	}
	*r = append(*r, client.Rule{Prefix: prefix, Access: access})
	return nil
}

func runTokenCreate(e *env, args []string) int {
	fs := e.flags(true)
	name := fs.String("name", "", "the token's `NAME` (who or what uses it)")
	var rules ruleFlag
	fs.Var(&rules, "rule", "`PREFIX=ACCESS`: read, write or admin on the names starting with PREFIX (repeat; \"=read\" is every name)")
	e.note(fs, `
Makes a token and prints its id and secret; the secret is shown this once
(the cluster keeps only a hash). Needs a management token.
`)
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if len(rules) == 0 || fs.NArg() != 0 {
		return e.usageErr(fs, "want at least one --rule and no arguments")
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		t, err := c.CreateToken(ctx, *name, rules...)
		if err != nil {
			return e.fail(err)
		}
		return e.printToken(t)
	})
}

func runTokenList(e *env, args []string) int {
	fs := e.flags(true)
	e.note(fs, "\nLists every token's id, name and rules; never secrets. Needs a management token.\n")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		ts, err := c.Tokens(ctx)
		if err != nil {
			return e.fail(err)
		}
		if e.json {
			return printJSON(e.stdout, ts)
		}
		w := table(e.stdout)
		fmt.Fprintln(w, "ID\tNAME\tRULES")
		for _, t := range ts {
			fmt.Fprintf(w, "%s\t%s\t%s\n", t.ID, t.Name, rulesText(t.Rules))
		}
		_ = w.Flush()
		return exitOK
	})
}

func runTokenDelete(e *env, args []string) int {
	fs := e.flags(false)
	e.note(fs, "\nDeletes the token: from then on every node answers it 401 (exit 77), and the\nsessions it made can no longer be kept alive. Needs a management token.\n")
	if code, ok := e.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return e.usageErr(fs, "want exactly one token ID")
	}
	return e.query(func(ctx context.Context, c *client.Client) int {
		if err := c.DeleteToken(ctx, fs.Arg(0)); err != nil {
			return e.fail(err)
		}
		fmt.Fprintf(e.stdout, "deleted token %s\n", fs.Arg(0))
		return exitOK
	})
}

// printToken shows a token just made, with its secret.
func (e *env) printToken(t *client.Token) int {
	if e.json {
		return printJSON(e.stdout, t)
	}
	fmt.Fprintf(e.stdout, "id:     %s\nname:   %s\nrules:  %s\nsecret: %s\n", t.ID, t.Name, rulesText(t.Rules), t.Secret)
	return exitOK
}

func rulesText(rules []client.Rule) string {
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = fmt.Sprintf("%q=%s", r.Prefix, r.Access)
	}
	return strings.Join(parts, " ")
}
