package lockstate

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Digest returns a hash of the table's whole content (not of its applied
// index): equal digests at equal applied indexes mean converged tables. It
// hashes the exported records field by field in a fixed binary layout.
func (t *Table) Digest() [32]byte {
	d := digester{h: sha256.New()}
	_ = t.Export(func(rec any) error {
		d.record(rec)
		return nil
	})
	var sum [32]byte
	d.h.Sum(sum[:0])
	return sum
}

type digester struct {
	h   hash.Hash
	buf []byte
}

func (d *digester) u(v uint64) { d.buf = binary.AppendUvarint(d.buf, v) }
func (d *digester) i(v int64)  { d.buf = binary.AppendVarint(d.buf, v) }
func (d *digester) s(v string) { d.u(uint64(len(v))); d.buf = append(d.buf, v...) }
func (d *digester) b(v bool) {
	if v {
		d.buf = append(d.buf, 1)
	} else {
		d.buf = append(d.buf, 0)
	}
}
func (d *digester) flush()     { d.h.Write(d.buf); d.buf = d.buf[:0] }
func (d *digester) tag(c byte) { d.buf = append(d.buf, c) }
func (d *digester) spec(l LockSpec) {
	d.s(l.Name)
	d.u(uint64(l.Mode))
	d.i(int64(l.Weight))
	d.i(int64(l.Limit))
}

func (d *digester) record(rec any) {
	switch r := rec.(type) {
	case Header: // not the index: content only
		d.tag('H')
		d.i(int64(r.Format))
		d.i(r.Clock)
		d.u(r.Seq)
		d.u(r.Forgotten)
		d.i(int64(r.Sessions))
		d.i(int64(r.Nodes))
		d.i(int64(r.Requests))
	case SessionRecord:
		d.tag('S')
		d.u(uint64(r.ID))
		d.s(r.Name)
		d.i(int64(r.TTL))
		d.s(string(r.OnDeadlock))
		d.b(r.Ordered)
		d.i(int64(r.LockDelay))
		d.u(uint64(len(r.Done)))
		for _, id := range r.Done {
			d.s(id)
		}
	case NodeRecord:
		d.tag('N')
		d.s(r.Name)
		d.u(r.Version)
		d.i(int64(r.Limit))
		d.i(r.DelayUntil)
		d.u(uint64(len(r.Holds)))
		for _, h := range r.Holds {
			d.u(uint64(h.Session))
			d.u(uint64(h.Mode))
			d.i(int64(h.Weight))
			d.i(int64(h.Count))
			d.u(h.Token)
			d.i(h.Expires)
			d.u(h.Granted)
		}
	case RequestRecord:
		d.tag('R')
		d.s(r.ID)
		d.u(uint64(r.Session))
		d.u(r.Seq)
		d.u(uint64(len(r.Locks)))
		for _, l := range r.Locks {
			d.spec(l)
		}
		d.s(string(r.Require))
		d.i(int64(r.Need))
		d.i(int64(r.HoldTTL))
		d.i(r.Deadline)
		d.i(int64(r.Restore))
		d.s(string(r.Status))
		d.u(r.Token)
		d.u(uint64(len(r.Granted)))
		for _, g := range r.Granted {
			d.spec(LockSpec{Name: g.Name, Mode: g.Mode, Weight: g.Weight})
			d.u(g.Token)
		}
		d.u(r.Created)
		d.u(r.Ended)
		d.u(uint64(len(r.Upgrade)))
		for _, u := range r.Upgrade {
			d.b(u)
		}
	}
	d.flush()
}
