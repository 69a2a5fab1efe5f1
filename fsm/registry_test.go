package fsm

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/lockd/lockd/lockstate"
)

// lockstateTypesWith returns the names of the types in package lockstate
// whose pointers have all of methods, read from its source so that a type
// the registries miss shows up too.
func lockstateTypesWith(t *testing.T, methods ...string) []string {
	t.Helper()
	files, err := filepath.Glob("../lockstate/*.go")
	if err != nil {
		t.Fatal(err)
	}
	has := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil {
				if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok {
						has[id.Name] = append(has[id.Name], fn.Name.Name)
					}
				}
			}
		}
	}
	var out []string
	for typ, ms := range has {
		if !slices.ContainsFunc(methods, func(m string) bool { return !slices.Contains(ms, m) }) {
			out = append(out, typ)
		}
	}
	slices.Sort(out)
	return out
}

// lockstateCommands returns the names of the types in package lockstate
// that have the methods of a Command (Validate and apply).
func lockstateCommands(t *testing.T) []string { return lockstateTypesWith(t, "Validate", "apply") }

// TestRegistryComplete fails when a command misses a part of its path
// through the layers (docs/architecture.md, "Adding a command"): a
// lockstate command with no registry row; a token field outside
// lockstate.Authority, which the node would never fill in; a decoder that
// drops the token; limits or a key that the leader would not stamp.
func TestRegistryComplete(t *testing.T) {
	registered := map[string]MessageType{}
	for i, ct := range commandTypes {
		if ct.typ != nil {
			registered[ct.typ.Elem().Name()] = MessageType(i)
		}
	}
	cmds := lockstateCommands(t)
	if len(cmds) < len(registered) {
		t.Fatalf("found only %v in lockstate's source, the registry has %d commands", cmds, len(registered))
	}
	for _, name := range cmds {
		mt, ok := registered[name]
		if !ok {
			t.Errorf("lockstate.%s has no row in the registry (fsm/commands.go)", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			checkAuthority(t, mt)
			checkLeaderFields(t, mt)
		})
	}
}

// checkAuthority: a command carries a token only through an embedded
// lockstate.Authority, and its decoder reads it back.
func checkAuthority(t *testing.T, mt MessageType) {
	cmd := NewCommand(mt)
	f, has := reflect.TypeOf(cmd).Elem().FieldByName("Auth")
	a := lockstate.AuthorityOf(cmd)
	if has != (a != nil) || has && len(f.Index) != 2 {
		t.Fatalf("%v has a field Auth (%v, index %v) that is not lockstate.Authority's: the node would not fill it in", mt, has, f.Index)
	}
	if a == nil {
		return
	}
	a.Auth = testTokenID
	b, err := Encode(1, cmd)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if lockstate.AuthorityOf(got).Auth != testTokenID {
		t.Fatalf("%v: the decoder drops auth", mt)
	}
	if MinFormat(cmd) < FormatACL {
		t.Fatalf("%v with a token: MinFormat %d, before the format that brought tokens", mt, MinFormat(cmd))
	}
}

// checkLeaderFields: every *Limits field, a session key and an acquire's
// request id scope are the leader's to fill in, and the registry row says
// where they are.
func checkLeaderFields(t *testing.T, mt MessageType) {
	cmd := NewCommand(mt)
	v := reflect.ValueOf(cmd).Elem()
	lf := LeaderFieldsOf(cmd)
	for i := range v.NumField() {
		field, addr := v.Type().Field(i), v.Field(i).Addr().Interface()
		switch {
		case field.Type == reflect.TypeFor[*lockstate.Limits]():
			if lf.Limits == nil || any(lf.Limits) != addr {
				t.Errorf("%v.%s: limits the leader does not stamp (no LeaderFields row)", mt, field.Name)
			}
		case field.Name == "Key":
			if lf.Key == nil || any(lf.Key) != addr {
				t.Errorf("%v.%s: a key the leader does not draw (no LeaderFields row)", mt, field.Name)
			}
		case field.Name == "SessionScoped":
			if lf.SessionScoped == nil || any(lf.SessionScoped) != addr {
				t.Errorf("%v.%s: a request id scope the leader does not set (no LeaderFields row)", mt, field.Name)
			}
		}
	}
}

// legacy are the commands that carry a token as they were declared before
// lockstate.Authority, each with its own Auth field: an entry's bytes must
// not change with the type that holds the field.
var legacy = map[reflect.Type]reflect.Type{
	reflect.TypeFor[*lockstate.CreateSession](): reflect.TypeFor[struct {
		Name       string               `msgpack:"name,omitempty"`
		TTL        time.Duration        `msgpack:"ttl"`
		OnDeadlock lockstate.OnDeadlock `msgpack:"on_deadlock,omitempty"`
		Ordered    bool                 `msgpack:"ordered,omitempty"`
		LockDelay  time.Duration        `msgpack:"lock_delay,omitempty"`
		Key        string               `msgpack:"key,omitempty"`
		Auth       string               `msgpack:"auth,omitempty"`
		Limits     *lockstate.Limits    `msgpack:"limits,omitempty"`
	}](),
	reflect.TypeFor[*lockstate.CloseSession](): reflect.TypeFor[struct {
		Session lockstate.SessionID `msgpack:"session"`
		Auth    string              `msgpack:"auth,omitempty"`
	}](),
	reflect.TypeFor[*lockstate.Acquire](): reflect.TypeFor[struct {
		Session   lockstate.SessionID  `msgpack:"session"`
		RequestID string               `msgpack:"request_id,omitempty"`
		Locks     []lockstate.LockSpec `msgpack:"locks"`
		Require   string               `msgpack:"require,omitempty"`
		Wait      time.Duration        `msgpack:"wait,omitempty"`
		HoldTTL   time.Duration        `msgpack:"hold_ttl,omitempty"`
		Auth      string               `msgpack:"auth,omitempty"`
		Limits    *lockstate.Limits    `msgpack:"limits,omitempty"`
		// Since FormatSessionRequestIDs, written only when set.
		SessionScoped bool `msgpack:"session_scoped,omitempty"`
	}](),
	reflect.TypeFor[*lockstate.Release](): reflect.TypeFor[struct {
		Session   lockstate.SessionID `msgpack:"session"`
		Name      string              `msgpack:"name,omitempty"`
		RequestID string              `msgpack:"request_id,omitempty"`
		Auth      string              `msgpack:"auth,omitempty"`
	}](),
	reflect.TypeFor[*lockstate.Surrender](): reflect.TypeFor[struct {
		Session lockstate.SessionID `msgpack:"session"`
		Name    string              `msgpack:"name"`
		Auth    string              `msgpack:"auth,omitempty"`
	}](),
	reflect.TypeFor[*lockstate.Cancel](): reflect.TypeFor[struct {
		Session   lockstate.SessionID `msgpack:"session,omitempty"`
		RequestID string              `msgpack:"request_id"`
		Auth      string              `msgpack:"auth,omitempty"`
	}](),
	reflect.TypeFor[*lockstate.Revoke](): reflect.TypeFor[struct {
		Name string `msgpack:"name"`
		Auth string `msgpack:"auth,omitempty"`
	}](),
	reflect.TypeFor[*lockstate.CreateToken](): reflect.TypeFor[struct {
		Auth   string                 `msgpack:"auth"`
		ID     string                 `msgpack:"id"`
		Hash   string                 `msgpack:"hash"`
		Name   string                 `msgpack:"name,omitempty"`
		Rules  []lockstate.Rule       `msgpack:"rules"`
		Limits *lockstate.TokenLimits `msgpack:"limits,omitempty"`
	}](),
	reflect.TypeFor[*lockstate.DeleteToken](): reflect.TypeFor[struct {
		Auth string `msgpack:"auth"`
		ID   string `msgpack:"id"`
	}](),
}

// toLegacy copies cmd's fields, by name, into its legacy declaration.
func toLegacy(cmd lockstate.Command) any {
	src := reflect.ValueOf(cmd).Elem()
	dst := reflect.New(legacy[reflect.TypeOf(cmd)]).Elem()
	for i := range dst.NumField() {
		f := src.FieldByName(dst.Type().Field(i).Name)
		dst.Field(i).Set(f.Convert(dst.Field(i).Type()))
	}
	return dst.Addr().Interface()
}

// encodeBody encodes v as Encode encodes a command's map.
func encodeBody(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAuthorityEncodesAsBefore: moving the token into lockstate.Authority
// changes no entry's bytes, for every command that carries one, with and
// without a token and with every other field set or not.
func TestAuthorityEncodesAsBefore(t *testing.T) {
	var cmds []lockstate.Command
	for _, c := range sampleCommands() {
		if legacy[reflect.TypeOf(c)] != nil {
			cmds = append(cmds, c)
		}
	}
	for typ := range legacy {
		full := reflect.New(typ.Elem())
		fill(full.Elem(), 1)
		cmds = append(cmds, full.Interface().(lockstate.Command), reflect.New(typ.Elem()).Interface().(lockstate.Command))
	}
	n := len(cmds)
	for _, c := range cmds[:n] { // each again without its token
		v := reflect.New(reflect.TypeOf(c).Elem())
		v.Elem().Set(reflect.ValueOf(c).Elem())
		lockstate.AuthorityOf(v.Interface().(lockstate.Command)).Auth = ""
		cmds = append(cmds, v.Interface().(lockstate.Command))
	}
	for _, c := range cmds {
		var body any = c
		if ct := rowOf(c); ct.body != nil {
			body = ct.body(c)
		}
		got, want := encodeBody(t, body), encodeBody(t, toLegacy(c))
		if string(got) != string(want) {
			t.Errorf("%#v encodes as\n%x, before as\n%x", c, got, want)
		}
	}
}
