// Package clientflags holds the command-line flags of lockd's programs
// that reach a cluster as its client (lockctl; lockd health and leave;
// lockbench): --ca-cert, --client-cert and --client-key, and --token,
// each defaulting to the environment variable the Go client reads
// (client.EnvCACert, client.EnvClientCert, client.EnvClientKey,
// client.EnvToken).
package clientflags

import (
	"crypto/tls"
	"flag"
	"os"
	"strings"

	"github.com/lockd/lockd/api/client"
)

// TLS are --ca-cert, --client-cert and --client-key.
type TLS struct {
	CACert, ClientCert, ClientKey string
}

// Register adds the three flags to fs.
func (f *TLS) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.CACert, "ca-cert", os.Getenv(client.EnvCACert),
		"speak HTTPS, trusting the CA certificate(s) in this PEM `file` (env "+client.EnvCACert+"; default: the system roots)")
	fs.StringVar(&f.ClientCert, "client-cert", os.Getenv(client.EnvClientCert),
		"speak HTTPS, presenting the client certificate in this PEM `file` (env "+client.EnvClientCert+")")
	fs.StringVar(&f.ClientKey, "client-key", os.Getenv(client.EnvClientKey),
		"the key of --client-cert, a PEM `file` (env "+client.EnvClientKey+")")
}

// Set reports whether any of the three is given.
func (f *TLS) Set() bool { return f.CACert != "" || f.ClientCert != "" || f.ClientKey != "" }

// Config is client.TLSConfig of the files the flags name; nil for plain
// HTTP.
func (f *TLS) Config() (*tls.Config, error) {
	return client.TLSConfig(f.CACert, f.ClientCert, f.ClientKey)
}

// Token is --token: an ACL token's secret, defaulting to client.EnvToken.
// It is a flag.Value whose String never shows the secret, so that usage
// texts (--help, and the usage printed after a mistyped flag) and
// anything that prints the flag's value show no part of it.
type Token struct {
	secret string
}

// Register adds --token to fs, taking its default from client.EnvToken.
func (t *Token) Register(fs *flag.FlagSet) {
	t.secret = strings.TrimSpace(os.Getenv(client.EnvToken))
	fs.Var(t, "token", "ACL token `SECRET`, sent as Authorization: Bearer (default $"+client.EnvToken+"; never printed)")
}

// Set implements flag.Value.
func (t *Token) Set(s string) error {
	t.secret = strings.TrimSpace(s)
	return nil
}

// String implements flag.Value. It is always "": the flag package prints
// a flag's default value in usage texts, and a secret must not be.
func (t *Token) String() string { return "" }

// Secret is the token's secret; "" for none.
func (t *Token) Secret() string { return t.secret }
