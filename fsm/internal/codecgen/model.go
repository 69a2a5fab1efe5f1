package codecgen

import (
	"fmt"
	"go/types"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// kind is how a value is read and written.
type kind int

const (
	kString  kind = iota
	kBool         // msgpack bool
	kInt          // a signed integer, in msgpack's most compact integer
	kUint         // an unsigned one, likewise
	kStruct       // a named struct: a map, by its own codec
	kPointer      // a pointer to a named struct: nil, or the struct
	kSlice        // nil, or an array of the elements
)

// value is the type of a field or of an element.
type value struct {
	kind  kind
	typ   types.Type
	elem  *value // kSlice: the elements; kPointer: the struct pointed to
	codec *codec // kStruct
}

// field is one key of a struct's map.
type field struct {
	key       string // the msgpack key: the tag's name
	path      string // the Go selector from the struct: "Authority.Auth" for an inlined field
	val       *value
	omitEmpty bool
}

// codec is the decoder (and, for a type a record holds, the encoder) of
// one struct type.
type codec struct {
	typ    *types.Named
	name   string // of its functions: decodeName, appendName
	fields []field
	// lenient: a command holds the type. Commands omit empty fields and
	// older entries lack newer ones, so its map may hold any of the fields,
	// each at most once. A type only records hold is read strictly: every
	// field that is not omitempty, exactly once, as the encoder writes it.
	lenient bool
	encode  bool // a record holds the type: Persist writes it
}

// model is every codec to generate.
type model struct {
	codecs map[*types.Named]*codec
}

// buildCodecs makes the codecs of the roots and of every struct type they hold.
func buildCodecs(commands, records []*types.Named) ([]*codec, error) {
	m := &model{codecs: map[*types.Named]*codec{}}
	for _, n := range slices.Concat(commands, records) {
		if _, err := m.codecOf(n); err != nil {
			return nil, err
		}
	}
	for _, n := range commands {
		mark(m.codecs[n], func(c *codec) *bool { return &c.lenient })
	}
	for _, n := range records {
		mark(m.codecs[n], func(c *codec) *bool { return &c.encode })
	}
	out := slices.Collect(maps.Values(m.codecs))
	slices.SortFunc(out, func(a, b *codec) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(out); i++ {
		if out[i].name == out[i-1].name {
			return nil, fmt.Errorf("codecgen: two types named %s (%v, %v)", out[i].name, out[i-1].typ, out[i].typ)
		}
	}
	return out, nil
}

// mark sets flag on c and on every codec c's fields reach.
func mark(c *codec, flag func(*codec) *bool) {
	if *flag(c) {
		return
	}
	*flag(c) = true
	for _, f := range c.fields {
		for v := f.val; v != nil; v = v.elem {
			if v.codec != nil {
				mark(v.codec, flag)
			}
		}
	}
}

// codecOf returns n's codec, making it (and its fields' codecs) first.
func (m *model) codecOf(n *types.Named) (*codec, error) {
	if c := m.codecs[n]; c != nil {
		return c, nil
	}
	name := []rune(n.Obj().Name())
	name[0] = unicode.ToUpper(name[0])
	c := &codec{typ: n, name: string(name)}
	m.codecs[n] = c
	if err := checkPlain(n); err != nil {
		return nil, err
	}
	fields, err := m.fieldsOf(n.Underlying().(*types.Struct), "", map[string]bool{})
	if err != nil {
		return nil, fmt.Errorf("codecgen: %v: %w", n, err)
	}
	if len(fields) > 32 {
		return nil, fmt.Errorf("codecgen: %v has %d fields, mpReader.readFields tracks 32", n, len(fields))
	}
	c.fields = fields
	return c, nil
}

// fieldsOf returns the msgpack fields of st, in the order msgpack writes
// them: declaration order, the fields of an embedded struct inlined in
// its place (the library's rule for an embedded struct without a name).
func (m *model) fieldsOf(st *types.Struct, prefix string, seen map[string]bool) ([]field, error) {
	var out []field
	for i := range st.NumFields() {
		f := st.Field(i)
		tag, _ := lookupTag(st.Tag(i))
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Embedded() && name == "" {
			inner, ok := f.Type().Underlying().(*types.Struct)
			if _, isNamed := f.Type().(*types.Named); !ok || !isNamed || opts != "" && opts != "inline" {
				return nil, fmt.Errorf("embedded %s: only a named struct, inlined, is supported", f.Name())
			}
			sub, err := m.fieldsOf(inner, prefix+f.Name()+".", seen)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		if !f.Exported() {
			continue // msgpack leaves unexported fields out
		}
		if name == "" || f.Embedded() {
			return nil, fmt.Errorf("field %s has no msgpack name (wire names are written out, in tags)", f.Name())
		}
		if opts != "" && opts != "omitempty" {
			return nil, fmt.Errorf("field %s: msgpack option %q is not supported", f.Name(), opts)
		}
		if seen[name] {
			return nil, fmt.Errorf("field %s: key %q twice", f.Name(), name)
		}
		seen[name] = true
		val, err := m.valueOf(f.Type())
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.Name(), err)
		}
		if opts == "omitempty" && val.kind == kStruct {
			return nil, fmt.Errorf("field %s: omitempty on a struct is not supported", f.Name())
		}
		out = append(out, field{key: name, path: prefix + f.Name(), val: val, omitEmpty: opts == "omitempty"})
	}
	return out, nil
}

// valueOf classifies t.
func (m *model) valueOf(t types.Type) (*value, error) {
	if n, ok := t.(*types.Named); ok {
		if err := checkPlain(n); err != nil {
			return nil, err
		}
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch info := u.Info(); {
		case info&types.IsString != 0:
			return &value{kind: kString, typ: t}, nil
		case info&types.IsBoolean != 0:
			return &value{kind: kBool, typ: t}, nil
		case info&types.IsUnsigned != 0 && u.Kind() != types.Uintptr:
			return &value{kind: kUint, typ: t}, nil
		case info&types.IsInteger != 0:
			return &value{kind: kInt, typ: t}, nil
		}
	case *types.Slice:
		if b, ok := u.Elem().Underlying().(*types.Basic); ok && b.Kind() == types.Uint8 {
			break // msgpack writes []byte as bin, not as an array
		}
		elem, err := m.valueOf(u.Elem())
		if err != nil {
			return nil, err
		}
		return &value{kind: kSlice, typ: t, elem: elem}, nil
	case *types.Pointer:
		elem, err := m.valueOf(u.Elem())
		if err != nil || elem.kind != kStruct {
			break
		}
		return &value{kind: kPointer, typ: t, elem: elem}, nil
	case *types.Struct:
		n, ok := t.(*types.Named)
		if !ok {
			break
		}
		c, err := m.codecOf(n)
		if err != nil {
			return nil, err
		}
		return &value{kind: kStruct, typ: t, codec: c}, nil
	}
	return nil, fmt.Errorf("type %v is not supported (strings, bools, integers, named structs, pointers to them and slices)", t)
}

// checkPlain refuses a type that encodes itself: msgpack would call its
// methods rather than write its fields or value.
func checkPlain(n *types.Named) error {
	for _, t := range []types.Type{n, types.NewPointer(n)} {
		ms := types.NewMethodSet(t)
		for _, name := range []string{"EncodeMsgpack", "DecodeMsgpack", "MarshalMsgpack", "UnmarshalMsgpack",
			"MarshalBinary", "UnmarshalBinary", "MarshalText", "UnmarshalText"} {
			if ms.Lookup(nil, name) != nil {
				return fmt.Errorf("codecgen: %v has %s, which msgpack calls instead of writing its value", n, name)
			}
		}
	}
	return nil
}

// lookupTag returns a struct tag's msgpack part.
func lookupTag(tag string) (string, bool) {
	return reflect.StructTag(tag).Lookup("msgpack")
}
