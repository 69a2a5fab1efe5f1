package lockservice

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lockd/lockd/fsm"
	"github.com/lockd/lockd/lockstate"
)

// namesUsed returns the lockstate names the non-test Go files of dir
// mention (lockstate.X as a type or a value).
func namesUsed(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "lockstate" {
					used[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	return used
}

// TestEveryCommandHasItsPath walks the command registry (fsm): a command
// that acts for a client (it embeds lockstate.Authority) gets the
// caller's token here and is refused to nobody while ACLs are on, and a
// method of this package proposes it; every other command is proposed by
// this package or by the leader's own duties (raftnode). A command added
// to lockstate and the registry without its handler fails here.
func TestEveryCommandHasItsPath(t *testing.T) {
	here, node := namesUsed(t, "."), namesUsed(t, "..")
	svc := &Service{cfg: Config{ACL: true}}
	const tok = "0f0e0d0c-0b0a-4908-8706-050403020100"
	caller := WithCaller(context.Background(), Caller{TokenID: tok})
	n := 0
	for mt := range fsm.IgnoreUnknownFlag {
		cmd := fsm.NewCommand(mt)
		if cmd == nil {
			continue
		}
		n++
		name := reflect.TypeOf(cmd).Elem().Name()
		a := lockstate.AuthorityOf(cmd)
		if _, has := reflect.TypeOf(cmd).Elem().FieldByName("Auth"); has != (a != nil) {
			t.Errorf("%s has a field Auth outside lockstate.Authority: withAuth cannot fill it in", name)
		}
		switch {
		case a != nil && !here[name]:
			t.Errorf("%s acts for a client, and no method of lockservice proposes it", name)
		case !here[name] && !node[name]:
			t.Errorf("%s: neither lockservice nor raftnode proposes it", name)
		}
		if err := svc.withAuth(caller, cmd); err != nil {
			t.Errorf("%s: withAuth: %v", name, err)
		}
		if a == nil {
			continue
		}
		if a.Auth != tok {
			t.Errorf("%s: withAuth left auth %q, want the caller's token", name, a.Auth)
		}
		err := svc.withAuth(context.Background(), fsm.NewCommand(mt))
		if e, ok := err.(*lockstate.Error); !ok || e.Code != lockstate.CodeUnauthorized {
			t.Errorf("%s for nobody with ACLs on: %v, want unauthorized", name, err)
		}
	}
	if n < 12 {
		t.Fatalf("the registry lists %d commands", n)
	}
}
