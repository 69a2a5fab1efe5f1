package client

import (
	"flag"
	"os"
	"strings"
)

// TokenFlag is a command-line program's --token: an ACL token's secret,
// defaulting to EnvToken. It is a flag.Value whose String never shows the
// secret, so that usage texts (--help, and the usage printed after a
// mistyped flag) and anything that prints the flag's value show no part
// of it.
type TokenFlag struct {
	secret string
}

// Register adds --token to fs, taking its default from EnvToken.
func (t *TokenFlag) Register(fs *flag.FlagSet) {
	t.secret = strings.TrimSpace(os.Getenv(EnvToken))
	fs.Var(t, "token", "ACL token `SECRET`, sent as Authorization: Bearer (default $"+EnvToken+"; never printed)")
}

// Set implements flag.Value.
func (t *TokenFlag) Set(s string) error {
	t.secret = strings.TrimSpace(s)
	return nil
}

// String implements flag.Value. It is always "": the flag package prints
// a flag's default value in usage texts, and a secret must not be.
func (t *TokenFlag) String() string { return "" }

// Secret is the token's secret; "" for none.
func (t *TokenFlag) Secret() string { return t.secret }
