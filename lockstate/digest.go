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
}

func (d *digester) record(rec any) {
	switch r := rec.(type) {
	case Header: // not the index: content only
		d.putTag('H')
		d.putInt(int64(r.Format))
		d.putInt(r.Clock)
		d.putUint(r.Seq)
		d.putUint(r.Forgotten)
		d.putInt(int64(r.Sessions))
		d.putInt(int64(r.Nodes))
		d.putInt(int64(r.Requests))
	case SessionRecord:
		d.putTag('S')
		d.putUint(uint64(r.ID))
		d.putString(r.Name)
		d.putInt(int64(r.TTL))
		d.putString(string(r.OnDeadlock))
		d.putBool(r.Ordered)
		d.putInt(int64(r.LockDelay))
		d.putUint(uint64(len(r.Done)))
		for _, id := range r.Done {
			d.putString(id)
		}
	case NodeRecord:
		d.putTag('N')
		d.putString(r.Name)
		d.putUint(r.Version)
		d.putInt(int64(r.Limit))
		d.putInt(r.DelayUntil)
		d.putUint(uint64(len(r.Holds)))
		for _, h := range r.Holds {
			d.putUint(uint64(h.Session))
			d.putUint(uint64(h.Mode))
			d.putInt(int64(h.Weight))
			d.putInt(int64(h.Count))
			d.putUint(h.Token)
			d.putInt(h.Expires)
			d.putUint(h.Granted)
		}
	case RequestRecord:
		d.putTag('R')
		d.putString(r.ID)
		d.putUint(uint64(r.Session))
		d.putUint(r.Seq)
		d.putUint(uint64(len(r.Locks)))
		for _, l := range r.Locks {
			d.putSpec(l)
		}
		d.putString(string(r.Require))
		d.putInt(int64(r.Need))
		d.putInt(int64(r.HoldTTL))
		d.putInt(r.Deadline)
		d.putInt(int64(r.Restore))
		d.putString(string(r.Status))
		d.putUint(r.Token)
		d.putUint(uint64(len(r.Granted)))
		for _, g := range r.Granted {
			d.putSpec(LockSpec{Name: g.Name, Mode: g.Mode, Weight: g.Weight})
			d.putUint(g.Token)
		}
		d.putUint(r.Created)
		d.putUint(r.Ended)
		d.putUint(uint64(len(r.Upgrade)))
		for _, u := range r.Upgrade {
			d.putBool(u)
		}
	default:
		d.aclRecord(rec)
	}
	d.flush()
}

// aclRecord hashes the records ACLs added; a table without them has none,
// so its digest is what it was before they existed.
func (d *digester) aclRecord(rec any) {
	switch r := rec.(type) {
	case SessionExtraRecord:
		d.putTag('X')
		d.putUint(uint64(r.Session))
		d.putString(r.Key)
		d.putString(r.Owner)
		d.putUint(uint64(len(r.Revoked)))
		for _, rv := range r.Revoked {
			d.putString(rv.Name)
			d.putUint(rv.Token)
			d.putUint(rv.Index)
		}
	case ACLRecord:
		d.putTag('A')
		d.putUint(r.Bootstrapped)
	case TokenRecord:
		d.putTag('T')
		d.putString(r.ID)
		d.putString(r.Name)
		d.putString(r.Hash)
		d.putUint(uint64(len(r.Rules)))
		for _, rule := range r.Rules {
			d.putString(rule.Prefix)
			d.putString(string(rule.Access))
		}
		d.putUint(r.Created)
		if r.Limits != nil { // only then: older tables keep their digests
			d.putTag('L')
			d.putInt(int64(r.Limits.Sessions))
			d.putInt(int64(r.Limits.Waiters))
		}
	case DeniedCertRecord:
		d.putTag('D')
		d.putString(r.Serial)
		d.putString(r.Reason)
		d.putUint(r.Index)
	}
}
