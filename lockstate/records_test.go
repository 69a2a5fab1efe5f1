package lockstate

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// recordKinds has a zero record of every kind.
var recordKinds = []Record{&Header{}, &SessionRecord{}, &NodeRecord{}, &RequestRecord{},
	&SessionExtraRecord{}, &ACLRecord{}, &TokenRecord{}, &DeniedCertRecord{}}

// digestMethod finds the digest method of a kind in the source.
var digestMethod = regexp.MustCompile(`(?m)^func \(\w+ \*(\w+)\) digest\(d \*digester\)`)

// TestRecordKindsListed: recordKinds has every type of this package's
// source with a digest method, which every Record has.
func TestRecordKindsListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var src, listed []string
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range digestMethod.FindAllSubmatch(b, -1) {
			if !strings.HasSuffix(name, "_test.go") {
				src = append(src, string(m[1]))
			}
		}
	}
	for _, rec := range recordKinds {
		listed = append(listed, reflect.TypeOf(rec).Elem().Name())
	}
	slices.Sort(src)
	slices.Sort(listed)
	if !slices.Equal(src, listed) {
		t.Fatalf("record kinds in the source %v, in recordKinds %v", src, listed)
	}
}

func digestOf(rec Record) [32]byte {
	d := digester{h: sha256.New()}
	rec.digest(&d)
	d.flush()
	var sum [32]byte
	d.h.Sum(sum[:0])
	return sum
}

// leaf is a value of a record that holds data.
type leaf struct {
	path string
	v    reflect.Value
}

// grow gives v, recursively, two elements in each slice and a value behind
// each pointer, and returns its leaves: every string, number and bool,
// and every pointer and slice itself (whose nil is a value of its own).
func grow(v reflect.Value, path string) []leaf {
	var out []leaf
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			out = append(out, grow(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		out = append(grow(v.Elem(), path), leaf{path, v})
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			out = append(out, grow(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		out = append(out, leaf{path, v})
	default:
		out = append(out, leaf{path, v})
	}
	return out
}

// change sets l to another value, and returns what puts it back.
func (l leaf) change() (undo func()) {
	old := reflect.New(l.v.Type()).Elem()
	old.Set(l.v)
	switch l.v.Kind() {
	case reflect.Pointer, reflect.Slice:
		l.v.SetZero()
	case reflect.String:
		l.v.SetString(l.v.String() + "x")
	case reflect.Bool:
		l.v.SetBool(!l.v.Bool())
	case reflect.Int, reflect.Int64:
		l.v.SetInt(l.v.Int() + 1)
	default:
		l.v.SetUint(l.v.Uint() + 1)
	}
	return func() { l.v.Set(old) }
}

// TestDigestEveryField: a change to any field of any record kind changes
// its digest (but for the table header's index, which the digest leaves
// out on purpose), so that a field added to a record cannot be left out
// of the digest by mistake.
func TestDigestEveryField(t *testing.T) {
	for _, kind := range recordKinds {
		typ := reflect.TypeOf(kind).Elem()
		rec := reflect.New(typ)
		leaves := grow(rec.Elem(), typ.Name())
		base := digestOf(rec.Interface().(Record))
		for _, l := range leaves {
			undo := l.change()
			changed := digestOf(rec.Interface().(Record)) != base
			undo()
			if want := l.path != "Header.Index"; changed != want {
				t.Errorf("changing %s: digest changed %t, want %t", l.path, changed, want)
			}
		}
	}
}

// TestLoaderHeaderFirst: a Loader takes the Header first and once.
func TestLoaderHeaderFirst(t *testing.T) {
	var l Loader
	if err := l.Load(&SessionRecord{ID: 1}); err == nil {
		t.Fatal("a session loaded before the header")
	}
	if _, err := l.Table(); err == nil {
		t.Fatal("a table without a header")
	}
	if err := l.Load(&Header{Format: FormatVersion, Sessions: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.Load(&Header{Format: FormatVersion}); err == nil {
		t.Fatal("a second header loaded")
	}
	if err := l.Load(&SessionRecord{ID: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Table(); err != nil {
		t.Fatal(err)
	}
}
