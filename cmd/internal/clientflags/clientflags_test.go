package clientflags_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/lockd/lockd/api/client"
	"github.com/lockd/lockd/cmd/internal/clientflags"
)

// Token takes LOCKD_TOKEN as its default and --token over it, and no
// usage text shows the secret: not --help's defaults, not the usage after
// a mistyped flag.
func TestToken(t *testing.T) {
	const env, flagged = "EnvSecretNobodyMaySee", "FlagSecretNobodyMaySee"
	t.Setenv(client.EnvToken, env)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, env},
		{[]string{"--token", flagged}, flagged},
		{[]string{"--token=" + flagged, "--bogus"}, ""}, // the parse fails
	} {
		var tok clientflags.Token
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		var out strings.Builder
		fs.SetOutput(&out)
		tok.Register(fs)
		err := fs.Parse(tc.args)
		fs.PrintDefaults()
		if tc.want != "" && (err != nil || tok.Secret() != tc.want) {
			t.Errorf("%q: secret %q, %v; want %q", tc.args, tok.Secret(), err, tc.want)
		}
		if s := out.String(); strings.Contains(s, "NobodyMaySee") || !strings.Contains(s, "-token") {
			t.Errorf("%q: usage shows a secret, or no --token:\n%s", tc.args, s)
		}
	}
}
