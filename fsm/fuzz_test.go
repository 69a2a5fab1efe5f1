package fsm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/lockd/lockd/lockstate"
)

func FuzzDecode(f *testing.F) {
	for _, cmd := range sampleCommands() {
		for _, now := range []int64{0, 1_700_000_000_000_000_000, -5} {
			b, err := Encode(now, cmd)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)                      // checksummed, as this build writes entries
			f.Add(b[envelopeHead:])       // bare, as older builds did
			f.Add(b[:len(b)-1])           // cut short
			f.Add(envelope(b[:len(b)-1])) // a good checksum around a bad entry
		}
	}
	f.Add([]byte{})
	f.Add([]byte{byte(IgnoreUnknownFlag | 9), 0x92, 0x00, 0x80})
	f.Add(envelope([]byte{byte(IgnoreUnknownFlag | 9), 0x92, 0x00, 0x80}))
	f.Add([]byte{byte(AcquireType), 0x92, 0x05, 0x81, 0xa5, 'l', 'o', 'c', 'k', 's', 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Add(envelope([]byte{byte(AcquireType), 0x92, 0x05, 0x81, 0xa5, 'l', 'o', 'c', 'k', 's', 0xdd, 0xff, 0xff, 0xff, 0xff}))
	f.Fuzz(func(t *testing.T, b []byte) {
		now, cmd, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(now, cmd)
		if err != nil {
			t.Fatalf("decoded %#v but cannot encode it: %v", cmd, err)
		}
		// msgpack's own decoder, which wrote nothing of this but must
		// read what Decode accepts the same way.
		if lib := libDecode(t, b); !reflect.DeepEqual(lib, cmd) {
			t.Fatalf("Decode and msgpack disagree:\n%#v\n%#v", cmd, lib)
		}
		now2, cmd2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoded %#v does not decode: %v", cmd, err)
		}
		if now2 != now || !reflect.DeepEqual(cmd2, cmd) {
			t.Fatalf("round trip changed the command:\n%d %#v\n%d %#v", now, cmd, now2, cmd2)
		}
	})
}

// FuzzApplySequence reads the input as a sequence of lock operations (the
// generator's choices), applies them to two FSMs, and requires identical
// results and digests after every entry; partway through it restores a
// snapshot of the first into a third FSM and compares that one too.
func FuzzApplySequence(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 10, 0, 0, 50, 0, 0, 0})
	f.Add([]byte("create acquire release surrender cancel tick expire: a, a/b, a/b/c, b, sem"))
	seed := make([]byte, 600)
	for i := range seed {
		seed[i] = byte(i*131 + i/7)
	}
	f.Add(seed)
	for i := range seed {
		seed[i] = byte(i*i*17 + 3)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1024 { // a few hundred entries: enough to reach every path, short enough to minimise
			b = b[:1024]
		}
		var snapAt int
		if len(b) > 0 {
			snapAt, b = int(b[0]), b[1:]
		}
		src := &byteSource{b: b}
		runReplicated(t, src, 1000, snapAt, src.done)
	})
}

// FuzzApplySequenceACL is FuzzApplySequence with ACLs: tokens, session
// keys and owners, Auth on most commands, revokes and limits.
func FuzzApplySequenceACL(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("bootstrap token revoke create acquire release surrender cancel tick: jobs/a, a/b, sem"))
	seed := make([]byte, 800)
	for i := range seed {
		seed[i] = byte(i*197 + i/5)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1024 {
			b = b[:1024]
		}
		var snapAt int
		if len(b) > 0 {
			snapAt, b = int(b[0]), b[1:]
		}
		src := &byteSource{b: b}
		g := newGen(src)
		g.acl = &aclGen{}
		runReplicatedGen(t, g, 1000, snapAt, src.done)
	})
}

// snapshotSeeds returns real snapshots to seed the restore fuzzers: an
// empty table, richState's, and one of a generated workload, each in
// format 2 and in format 1, aclState's and one of a generated workload
// with ACLs in format 3, and the compatibility fixture's (format 1).
// Format 1 has no checksums, so mutations of it reach the record decoders
// and the loader; those of format 2 mostly stop at a checksum.
func snapshotSeeds(f *testing.F) [][]byte {
	src := newTestFSM(f)
	g := newGen(rand.New(rand.NewPCG(5, 5)))
	for i := 1; i <= 200; i++ {
		cmd := g.next(src.FSM)
		g.observe(cmd, src.applyAt(uint64(i), g.now, cmd))
	}
	var seeds [][]byte
	for _, fsm := range []*FSM{newTestFSM(f).FSM, richState(f).f.FSM, src.FSM} {
		b := snapshotBytes(f, fsm)
		seeds = append(seeds, b, legacySnapshot(f, b))
	}
	acl := newTestFSM(f)
	g = newGen(rand.New(rand.NewPCG(6, 6)))
	g.acl = &aclGen{}
	for i := 1; i <= 200; i++ {
		cmd := g.next(acl.FSM)
		g.observe(cmd, acl.applyAt(uint64(i), g.now, cmd))
	}
	seeds = append(seeds, snapshotBytes(f, aclState(f).f.FSM), snapshotBytes(f, acl.FSM))
	for _, name := range []string{"snapshot-mid.bin", "snapshot-final.bin"} {
		b, err := os.ReadFile(filepath.Join(compatDir, name))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// FuzzRestore restores arbitrary bytes. It must never panic, allocate much
// more than the input's size, or change the FSM when it fails; a stream it
// accepts must survive another snapshot and restore unchanged.
func FuzzRestore(f *testing.F) {
	for _, b := range snapshotSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := declaredRecords(b); n > len(b) {
			// lockstate.NewLoader presizes its maps from the header's
			// counts, capped at 2^20 entries each: bounded (see
			// TestLoaderHeaderCountsAreCapped), but more than this
			// check's per-byte allowance.
			t.Skipf("header declares %d records in %d bytes", n, len(b))
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := readSnapshot(bytes.NewReader(b))
		runtime.ReadMemStats(&after)
		if errors.Is(err, errDecodePanic) {
			t.Fatal(err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20+256*uint64(len(b)) {
			t.Fatalf("restoring %d bytes allocated %d", len(b), n)
		}

		fsm := newTestFSM(t)
		seedOther(t, fsm)
		digest, applied := fsm.Digest(), fsm.AppliedIndex()
		if err := restoreBytes(fsm.FSM, b); err != nil {
			if fsm.Digest() != digest || fsm.AppliedIndex() != applied {
				t.Fatalf("failed restore (%v) changed the FSM", err)
			}
			return
		}
		again := newTestFSM(t)
		if err := restoreBytes(again.FSM, snapshotBytes(t, fsm.FSM)); err != nil {
			t.Fatalf("snapshot of a restored stream does not restore: %v", err)
		}
		if again.Digest() != fsm.Digest() || again.AppliedIndex() != fsm.AppliedIndex() {
			t.Fatal("snapshot and restore changed the restored state")
		}
	})
}

// declaredRecords returns how many records b's table header declares, or 0
// if b does not start with the two headers.
func declaredRecords(b []byte) int {
	rr, _, err := openSnapshot(bytes.NewReader(b))
	if err != nil {
		return 0
	}
	var th lockstate.Header
	if t, err := rr.tag(); err != nil || t != recTable || rr.decode(func(r *mpReader) error { return decodeHeader(r, &th) }) != nil {
		return 0
	}
	return max(th.Sessions, th.Nodes, th.Requests)
}

// FuzzRecordDecode decodes arbitrary bytes as each kind of record and
// requires msgpack's own decoder to read whatever is accepted the same
// way, and the record to survive encoding and decoding again.
func FuzzRecordDecode(f *testing.F) {
	for _, b := range snapshotSeeds(f) {
		// The records of a real snapshot, each as the seed of its kind.
		rr, hdr, err := openSnapshot(bytes.NewReader(b))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(codecIndex[snapshotHeader]()), appendSnapshotHeader(nil, &hdr))
		for {
			t, err := rr.tag()
			if err != nil || t == recEnd && hdr.Format == snapshotFormat1 {
				break
			}
			k := codecIndex[snapshotTrailer]()
			if t != recEnd {
				k = int(kindByTag[t]) // the registry's kinds come first in codecs
			}
			var rec []byte
			_ = rr.read(func(r *mpReader) error {
				start := r.pos
				_, n, err := decodeRecord(codecs[k], r.left())
				r.pos += n
				rec = bytes.Clone(r.b[start:r.pos])
				return err
			})
			f.Add(uint8(k), rec)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		k := codecs[int(which)%len(codecs)]
		rec, n, err := decodeRecord(k, b)
		if err != nil {
			return
		}
		b = b[:n]
		if lib := libDecodeRecord(t, k, b); !reflect.DeepEqual(lib, rec) {
			t.Fatalf("%v: decoder and msgpack disagree:\n%+v\n%+v", k.typ, rec, lib)
		}
		again, _, err := decodeRecord(k, k.append(nil, rec))
		if err != nil {
			t.Fatalf("%v: re-encoded %+v does not decode: %v", k.typ, rec, err)
		}
		if !reflect.DeepEqual(again, rec) {
			t.Fatalf("%v: round trip changed the record:\n%+v\n%+v", k.typ, rec, again)
		}
	})
}
