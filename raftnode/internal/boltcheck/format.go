package boltcheck

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
)

// The bolt file format (go.etcd.io/bbolt, file format version 2): pages of
// the meta's page size, each opening with a 16-byte header; bolt writes
// its structs in the machine's byte order.
const (
	magic        = 0xED0CDAED
	version      = 2
	pageHeader   = 16 // id uint64, flags uint16, count uint16, overflow uint32
	metaSize     = 64 // magic, version, page size, flags uint32; root, sequence, freelist, pgid, txid, checksum uint64
	elemSize     = 16 // a branch or leaf element
	bucketHeader = 16 // a bucket value: root uint64, sequence uint64
	noFreelist   = ^uint64(0)
	maxDepth     = 64 // tree levels and nested buckets together

	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10
	bucketLeaf   = 0x01 // a leaf element whose value is a bucket
)

var ne = binary.NativeEndian

// metaPage is what the check needs from a meta page.
type metaPage struct {
	pageSize uint32
	root     uint64 // the root bucket's page
	freelist uint64 // the freelist's page, or noFreelist
	high     uint64 // pages [0, high) hold the database
	txid     uint64
}

// parseMeta reads the meta page in b, and reports whether it passes
// bolt's own validation: magic, version and checksum.
func parseMeta(b []byte) (metaPage, bool) {
	if len(b) < pageHeader+metaSize {
		return metaPage{}, false
	}
	m := b[pageHeader:]
	h := fnv.New64a()
	h.Write(m[:56])
	if ne.Uint32(m) != magic || ne.Uint32(m[4:]) != version || ne.Uint64(m[56:]) != h.Sum64() {
		return metaPage{}, false
	}
	return metaPage{pageSize: ne.Uint32(m[8:]), root: ne.Uint64(m[16:]), freelist: ne.Uint64(m[32:]),
		high: ne.Uint64(m[40:]), txid: ne.Uint64(m[48:])}, true
}

// meta returns the meta page bolt will use: the valid one with the higher
// transaction id. Like bolt, it finds the second meta page by probing the
// page sizes bolt supports when the first is invalid.
func (c *checker) meta(size int64) (metaPage, error) {
	b := make([]byte, pageHeader+metaSize)
	var m0, m1 metaPage
	ok0, ok1 := false, false
	if _, err := c.f.ReadAt(b, 0); err == nil {
		m0, ok0 = parseMeta(b)
	}
	for ps := int64(1024); ps <= 1<<24 && ps+int64(len(b)) <= size; ps *= 2 {
		if ok0 && ps != int64(m0.pageSize) {
			continue
		}
		if _, err := c.f.ReadAt(b, ps); err == nil {
			if m, ok := parseMeta(b); ok && int64(m.pageSize) == ps {
				m1, ok1 = m, true
				break
			}
		}
	}
	switch {
	case ok0 && ok1 && m1.txid > m0.txid, !ok0 && ok1:
		return m1, nil
	case ok0:
		return m0, nil
	}
	return metaPage{}, errors.New("neither meta page is valid")
}
