// Package codecgen writes package fsm's msgpack codecs (codec_gen.go) from
// the msgpack tags of the types they read and write, so that each field's
// wire name is spelled once, in its tag:
//
//   - a decoder for every command of package lockstate (a type whose
//     pointer is a lockstate.Command), which Decode uses;
//   - a decoder and an encoder for every snapshot record kind (a type whose
//     pointer is a lockstate.Record) and for fsm's own stream framing (its
//     struct types with msgpack tags: the snapshot header and trailer);
//   - the same for every struct type those hold.
//
// The code reads and writes exactly the msgpack that
// github.com/vmihailenco/msgpack/v5 reads and writes for these types
// (with UseCompactInts), without reflection; fsm's tests check both
// directions against the library. It is written against fsm's wire.go
// (mpReader and the append functions). See Generate for the rules.
package codecgen

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// loaded is package fsm, type-checked without its generated file, and the
// lockstate package it imports.
type loaded struct {
	fsm, lockstate *types.Package
}

// load type-checks the package in dir from its source, leaving out the
// file named out. The imported packages come from their export data (go
// list -export), so lockstate is read as it is compiled. The package's own
// errors are ignored: without its generated file it refers to functions
// that only that file defines, and the file may be out of date, which is
// what the generator is run to fix.
func load(dir, out string) (*loaded, error) {
	bp, err := build.Default.ImportDir(dir, 0)
	if err != nil {
		return nil, fmt.Errorf("codecgen: %w", err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	imports := map[string]bool{}
	for _, name := range bp.GoFiles {
		if name == out {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("codecgen: %w", err)
		}
		files = append(files, f)
		for _, imp := range f.Imports {
			imports[strings.Trim(imp.Path.Value, `"`)] = true
		}
	}
	exports, err := exportData(dir, slices.Sorted(maps.Keys(imports)))
	if err != nil {
		return nil, err
	}
	conf := types.Config{
		Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			if f := exports[path]; f != "" {
				return os.Open(f)
			}
			return nil, fmt.Errorf("no export data for %s", path)
		}),
		Error: func(error) {},
	}
	pkg, _ := conf.Check(bp.Name, fset, files, nil)
	l := &loaded{fsm: pkg}
	for _, imp := range pkg.Imports() {
		if imp.Name() == "lockstate" {
			l.lockstate = imp
		}
	}
	if l.lockstate == nil || l.lockstate.Scope().Lookup("Record") == nil || l.lockstate.Scope().Lookup("Command") == nil {
		return nil, fmt.Errorf("codecgen: package %s does not import a lockstate package with Command and Record", bp.Name)
	}
	return l, nil
}

// exportData returns the export data file of each of the packages and of
// everything they import.
func exportData(dir string, pkgs []string) (map[string]string, error) {
	args := append([]string{"list", "-e", "-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}"}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("codecgen: go list: %w\n%s", err, stderr.Bytes())
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok {
			m[path] = file
		}
	}
	return m, sc.Err()
}

// roots returns the types to generate codecs for: lockstate's commands,
// lockstate's records and fsm's own framing types, each sorted by name.
func (l *loaded) roots() (commands, records []*types.Named) {
	iface := func(name string) *types.Interface {
		return l.lockstate.Scope().Lookup(name).Type().Underlying().(*types.Interface)
	}
	command, record := iface("Command"), iface("Record")
	for _, name := range l.lockstate.Scope().Names() {
		n, ok := named(l.lockstate.Scope().Lookup(name))
		if !ok {
			continue
		}
		if types.Implements(types.NewPointer(n), command) {
			commands = append(commands, n)
		}
		if types.Implements(types.NewPointer(n), record) {
			records = append(records, n)
		}
	}
	for _, name := range l.fsm.Scope().Names() {
		if n, ok := named(l.fsm.Scope().Lookup(name)); ok && hasMsgpackTags(n) {
			records = append(records, n)
		}
	}
	return commands, records
}

// named returns obj's type if obj declares a named struct type.
func named(obj types.Object) (*types.Named, bool) {
	tn, ok := obj.(*types.TypeName)
	if !ok || tn.IsAlias() {
		return nil, false
	}
	n, ok := tn.Type().(*types.Named)
	if !ok {
		return nil, false
	}
	_, isStruct := n.Underlying().(*types.Struct)
	return n, isStruct
}

func hasMsgpackTags(n *types.Named) bool {
	st := n.Underlying().(*types.Struct)
	for i := range st.NumFields() {
		if _, ok := lookupTag(st.Tag(i)); ok {
			return true
		}
	}
	return false
}
