package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lockd/lockd/api/wire"
)

// wireCode is code's entry in wire.ErrorCodes answered with status.
func wireCode(code string, status int) wire.ErrorCode {
	i := slices.IndexFunc(wire.ErrorCodes(), func(e wire.ErrorCode) bool { return e.Code == code && e.Status == status })
	if i < 0 {
		return wire.ErrorCode{Code: code, Status: status}
	}
	return wire.ErrorCodes()[i]
}

// TestTableCodesAreAPICodes: every error code the lock table (lockstate)
// and the service around it (raftnode/lockservice) can fail a command
// with is in the API's list, so the API answers it with its status. The
// codes are read from the source, so that a code added there without
// an entry in wire.ErrorCodes fails here.
func TestTableCodesAreAPICodes(t *testing.T) {
	codes := map[string]string{} // code -> where it is declared
	for _, dir := range []string{"../lockstate", "../raftnode/lockservice"} {
		for code, where := range declaredCodes(t, dir) {
			codes[code] = where
		}
	}
	if len(codes) < 13 { // lockstate alone has 13: the parse found too few to mean anything
		t.Fatalf("found only %d codes declared: %v", len(codes), codes)
	}
	for code, where := range codes {
		if _, ok := wire.LookupError(code); !ok {
			t.Errorf("%s declares code %q, which wire.ErrorCodes does not list", where, code)
		}
	}
}

// declaredCodes returns the string values of the constants of type Code
// (or lockstate.Code) in dir's non-test Go files.
func declaredCodes(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || !isCodeType(vs.Type) {
				return true
			}
			for i, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					codes[s] = fset.Position(vs.Names[i].Pos()).String()
				}
			}
			return true
		})
	}
	return codes
}

// isCodeType reports whether t is Code or lockstate.Code.
func isCodeType(t ast.Expr) bool {
	switch t := t.(type) {
	case *ast.Ident:
		return t.Name == "Code"
	case *ast.SelectorExpr:
		id, ok := t.X.(*ast.Ident)
		return ok && id.Name == "lockstate" && t.Sel.Name == "Code"
	}
	return false
}
