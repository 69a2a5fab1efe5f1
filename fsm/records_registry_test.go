package fsm

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/lockd/lockd/fsm/internal/codecgen"
	"github.com/lockd/lockd/lockstate"
)

// TestRecordRegistryComplete fails when a kind of snapshot record misses a
// part of its path (docs/architecture.md, "Adding a snapshot record
// kind"): a lockstate record type with no registry row, or a row whose
// tag, name or format clashes with another's or with the stream's own
// records. The rest of the path is checked elsewhere: that Export writes
// every kind and the loader takes it back (TestEveryRecordKind), that the
// digest covers every field (lockstate.TestDigestEveryField), that the
// codecs write and read every field as msgpack does (TestRecordCodec) and
// are generated from the types as they are (TestCodecGenerated).
func TestRecordRegistryComplete(t *testing.T) {
	var registered []string
	tags, names := map[recordType]bool{recHeader: true, recEnd: true}, map[string]bool{"header": true, "end": true}
	for _, k := range recordKinds {
		registered = append(registered, k.typ.Elem().Name())
		if tags[k.tag] || names[k.name] {
			t.Errorf("%s: tag %d or name %q taken", k.typ, k.tag, k.name)
		}
		tags[k.tag], names[k.name] = true, true
		if k.since < snapshotFormat1 || k.since > SnapshotFormat {
			t.Errorf("%s: since format %d, this build writes %d to %d", k.typ, k.since, snapshotFormat1, SnapshotFormat)
		}
	}
	if src := lockstateTypesWith(t, "load", "digest"); !slices.Equal(src, slices.Sorted(slices.Values(registered))) {
		t.Errorf("lockstate's record kinds %v, the registry's (fsm/records.go) %v", src, registered)
	}
	if recordKinds[0].typ != reflect.TypeFor[*lockstate.Header]() || !recordKinds[0].single {
		t.Error("the registry does not start with the table header, once: Export does, and the loader relies on it")
	}
}

// everyKindState has a record of every kind Export writes. A new kind adds
// records of its own here (not to the golden tables, which hold what
// earlier builds wrote).
func everyKindState(t testing.TB) *driver { return holdValuesState(t) }

// TestEveryRecordKind: a table with a record of every kind exports each
// kind, in the registry's order, and a snapshot of it restores to the same
// records, the same digest and a table that snapshots to the same bytes;
// each record's format is no older than its kind's, and the snapshot's is
// the newest of them.
func TestEveryRecordKind(t *testing.T) {
	d := everyKindState(t)
	recs := exportOf(d.f.FSM)
	seen := map[reflect.Type]int{}
	k, newest := 0, snapshotFormat2
	for _, rec := range recs {
		if k = nextKind(k, rec); k == len(recordKinds) {
			t.Fatalf("a %T: not a registered kind, or out of the registry's order", rec)
		}
		seen[recordKinds[k].typ]++
		f := recordKinds[k].formatFor(rec)
		if f < recordKinds[k].since {
			t.Errorf("a %T needs format %d, before its kind's %d", rec, f, recordKinds[k].since)
		}
		newest = max(newest, f)
	}
	for _, k := range recordKinds {
		if seen[k.typ] == 0 {
			t.Errorf("no %s record: everyKindState lacks the kind, or Export does not write it", k.name)
		}
		if k.single && seen[k.typ] > 1 {
			t.Errorf("%d %s records, a stream holds one at most", seen[k.typ], k.name)
		}
	}
	snap := snapshotBytes(t, d.f.FSM)
	if got := snapshotFormatOf(t, snap); got != SnapshotFormat || newest != snapshotFormatHoldValues {
		t.Errorf("snapshot format %d, newest record format %d", got, newest)
	}
	f := newTestFSM(t)
	if err := restoreBytes(f.FSM, snap); err != nil {
		t.Fatal(err)
	}
	sameState(t, "restored", d.f.FSM, f.FSM)
	if got := exportOf(f.FSM); !reflect.DeepEqual(got, recs) {
		t.Fatalf("the restored table exports other records:\n%v\n%v", got, recs)
	}
	if again := snapshotBytes(t, f.FSM); !bytes.Equal(again, snap) {
		t.Fatal("the restored table snapshots to other bytes")
	}
}

// TestCodecGenerated: codec_gen.go is what codecgen makes of the types as
// they are now. Run go generate in fsm after changing a command, a record
// or a struct either holds.
func TestCodecGenerated(t *testing.T) {
	want, err := codecgen.Generate(".", "codec_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("codec_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("codec_gen.go is not what codecgen generates from the types: run go generate ./fsm")
	}
}
