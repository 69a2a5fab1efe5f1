package codecgen

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
)

// check type-checks src, a file of package p, and returns its named types.
func check(t *testing.T, src string) map[string]*types.Named {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", "package p\n"+src, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := (&types.Config{Importer: importer.Default()}).Check("p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*types.Named{}
	for _, name := range pkg.Scope().Names() {
		if n, ok := named(pkg.Scope().Lookup(name)); ok {
			out[name] = n
		}
	}
	return out
}

// TestRefuses: the generator refuses what it would not write as msgpack
// does, rather than write something else.
func TestRefuses(t *testing.T) {
	for name, c := range map[string]struct{ src, err string }{
		"no tag":             {"type R struct{ A int }", "no msgpack name"},
		"bytes":              {"type R struct{ A []byte `msgpack:\"a\"` }", "not supported"},
		"map":                {"type R struct{ A map[string]int `msgpack:\"a\"` }", "not supported"},
		"float":              {"type R struct{ A float64 `msgpack:\"a\"` }", "not supported"},
		"anonymous struct":   {"type R struct{ A struct{ B int } `msgpack:\"a\"` }", "not supported"},
		"pointer to int":     {"type R struct{ A *int `msgpack:\"a\"` }", "not supported"},
		"omitempty struct":   {"type S struct{ B int `msgpack:\"b\"` }\ntype R struct{ A S `msgpack:\"a,omitempty\"` }", "omitempty on a struct"},
		"other option":       {"type R struct{ A string `msgpack:\"a,intern\"` }", "not supported"},
		"key twice":          {"type R struct{ A, B int `msgpack:\"a\"` }", "twice"},
		"inlined key twice":  {"type E struct{ A int `msgpack:\"a\"` }\ntype R struct{ E\n B int `msgpack:\"a\"` }", "twice"},
		"embedded pointer":   {"type E struct{ A int `msgpack:\"a\"` }\ntype R struct{ *E }", "embedded"},
		"marshals itself":    {"type M int\nfunc (M) MarshalText() ([]byte, error) { return nil, nil }\ntype R struct{ A M `msgpack:\"a\"` }", "MarshalText"},
		"encodes itself":     {"type R struct{ A int `msgpack:\"a\"` }\nfunc (*R) EncodeMsgpack(any) error { return nil }", "EncodeMsgpack"},
		"too many fields":    {"type R struct{ " + manyFields(33) + " }", "33 fields"},
		"two types one name": {"type r struct{ A int `msgpack:\"a\"` }\ntype R struct{ B r `msgpack:\"b\"` }", "two types named R"},
	} {
		t.Run(name, func(t *testing.T) {
			ts := check(t, c.src)
			_, err := buildCodecs(nil, []*types.Named{ts["R"]})
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want one saying %q", err, c.err)
			}
		})
	}
}

func manyFields(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("F" + string(rune('a'+i/26)) + string(rune('a'+i%26)) + " int `msgpack:\"f" + string(rune('a'+i/26)) + string(rune('a'+i%26)) + "\"`\n")
	}
	return b.String()
}

// TestLenientWhereCommandsReach: a struct a command holds is read
// leniently, one only records hold strictly, and only what records hold
// gets an encoder.
func TestLenientWhereCommandsReach(t *testing.T) {
	ts := check(t, "type S struct{ A int `msgpack:\"a\"` }\ntype H struct{ A int `msgpack:\"a\"` }\n"+
		"type C struct{ S []S `msgpack:\"s\"` }\ntype R struct{ S *S `msgpack:\"s\"`\n H []H `msgpack:\"h\"` }")
	codecs, err := buildCodecs([]*types.Named{ts["C"]}, []*types.Named{ts["R"]})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]bool{}
	for _, c := range codecs {
		got[c.name] = [2]bool{c.lenient, c.encode}
	}
	want := map[string][2]bool{"C": {true, false}, "R": {false, true}, "S": {true, true}, "H": {false, true}}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: lenient, encode %v, want %v", name, got[name], w)
		}
	}
}
