package lockstate

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Digest returns a hash of the table's whole content (not of its applied
// index): equal digests at equal applied indexes mean converged tables. It
// hashes the exported records field by field, each kind in its own fixed
// binary layout (its digest method), which never changes: digests are
// compared across nodes of different builds.
func (t *Table) Digest() [32]byte {
	d := digester{h: sha256.New()}
	_ = t.Export(func(rec Record) error {
		rec.digest(&d)
		d.flush()
		return nil
	})
	var sum [32]byte
	d.h.Sum(sum[:0])
	return sum
}

// digester writes records in the Digest's layout: varints, and strings
// after their length.
type digester struct {
	h   hash.Hash
	buf []byte
}

func (d *digester) putUint(v uint64)   { d.buf = binary.AppendUvarint(d.buf, v) }
func (d *digester) putInt(v int64)     { d.buf = binary.AppendVarint(d.buf, v) }
func (d *digester) putString(v string) { d.putUint(uint64(len(v))); d.buf = append(d.buf, v...) }
func (d *digester) putBool(v bool) {
	if v {
		d.buf = append(d.buf, 1)
	} else {
		d.buf = append(d.buf, 0)
	}
}
func (d *digester) flush()        { d.h.Write(d.buf); d.buf = d.buf[:0] }
func (d *digester) putTag(c byte) { d.buf = append(d.buf, c) }
func (d *digester) putSpec(l LockSpec) {
	d.putString(l.Name)
	d.putUint(uint64(l.Mode))
	d.putInt(int64(l.Weight))
	d.putInt(int64(l.Limit))
	d.putValue(l.Value)
}

// putValue writes a hold's or a spec's value, tagged, and nothing for no
// value: a table without values digests exactly as before values existed,
// so digests of old fixtures and of nodes of mixed builds still agree.
func (d *digester) putValue(v string) {
	if v != "" {
		d.putTag('V')
		d.putString(v)
	}
}
