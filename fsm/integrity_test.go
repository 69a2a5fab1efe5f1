package fsm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/lockd/lockd/lockstate"
)

// TestApplyCorruptEntry replays a tampered log: one letter of a lock name
// changed inside a stored entry. The entry must not apply: the
// FSM stops through Config.Fatal with a message naming the entry's index
// and term and what to do, and the table stays as it was.
func TestApplyCorruptEntry(t *testing.T) {
	d := newDriver(t)
	s := d.session()
	good, err := Encode(d.now, &lockstate.Acquire{Session: s, Locks: []lockstate.LockSpec{lock("db/orders", lockstate.Write)}})
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[bytes.Index(bad, []byte("orders"))] = 'b' // db/brders
	before := d.f.Digest()

	res := d.f.Apply(&raft.Log{Index: 2, Term: 7, Type: raft.LogCommand, Data: bad})
	if err, ok := res.(error); !ok || !errors.Is(err, ErrStopped) {
		t.Fatalf("response %#v, want ErrStopped", res)
	}
	if d.f.fatalCount() != 1 {
		t.Fatalf("Fatal called %d times", d.f.fatalCount())
	}
	msg := d.f.fatals[0]
	for _, want := range []string{"fsm: entry 2 (term 7,", "corrupt", "checksum mismatch",
		"this node's copy of the log is corrupt", "DELETE /v1/members/", "move its data dir away", "receives a snapshot"} {
		if !strings.Contains(msg, want) {
			t.Errorf("fatal message lacks %q:\n%s", want, msg)
		}
	}
	if d.f.Digest() != before || d.f.AppliedIndex() != 1 {
		t.Fatal("the corrupt entry changed the FSM")
	}
	if res := d.f.applyRaw(3, good); !errors.Is(res.(error), ErrStopped) {
		t.Fatalf("apply after the corrupt entry: %#v", res)
	}

	// The limit: an entry written before the envelope has no checksum, and
	// the same change goes through unnoticed.
	legacy := newDriver(t)
	legacy.session()
	if res, ok := legacy.f.applyRaw(2, bad[envelopeHead:]).(*lockstate.Result); !ok || res.Err != nil {
		t.Fatalf("bare entry: %#v", res)
	}
	if names := held(legacy.f.FSM, s); !reflect.DeepEqual(names, []string{"db/brders"}) {
		t.Fatalf("bare entry: held %v", names)
	}
}

// TestApplyEnvelopedIgnorable: an unknown command marked IgnoreUnknownFlag
// inside the envelope is skipped as a bare one is, but only once its
// checksum matched; a damaged one stops the FSM instead of being skipped.
func TestApplyEnvelopedIgnorable(t *testing.T) {
	entry := envelope([]byte{byte(IgnoreUnknownFlag | 0x33), 0x92, 0x05, 0x80})
	d := newDriver(t)
	d.session()
	before := d.f.Digest()
	if res := d.f.applyRaw(2, entry); res != nil || d.f.fatalCount() != 0 || d.f.AppliedIndex() != 2 || d.f.Digest() != before {
		t.Fatalf("skip: response %#v, fatals %v, applied %d", res, d.f.fatals, d.f.AppliedIndex())
	}
	damaged := bytes.Clone(entry)
	damaged[len(damaged)-1] ^= 1
	d.index = 2
	d.session()
	if res := d.f.applyRaw(4, damaged); !errors.Is(res.(error), ErrStopped) || d.f.fatalCount() != 1 {
		t.Fatalf("damaged: response %#v, fatals %v", res, d.f.fatals)
	}
	if !strings.Contains(d.f.fatals[0], "checksum mismatch") {
		t.Fatalf("fatal message %q", d.f.fatals[0])
	}
}

// TestApplyBareAndChecksummedAgree applies a generated workload twice,
// once as this build writes entries and once bare, as older builds wrote
// them: every result and digest must be the same.
func TestApplyBareAndChecksummedAgree(t *testing.T) {
	enveloped, bare := newTestFSM(t), newTestFSM(t)
	g := newGen(rand.New(rand.NewPCG(12, 12)))
	for i := uint64(1); i <= 600; i++ {
		cmd := g.next(enveloped.FSM)
		b, err := Encode(g.now, cmd)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := enveloped.applyRaw(i, b).(*lockstate.Result)
		got, _ := bare.applyRaw(i, b[envelopeHead:]).(*lockstate.Result)
		if want == nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("entry %d %T: results differ:\n%+v\n%+v", i, cmd, want, got)
		}
		g.observe(cmd, want)
		sameState(t, "entry "+itoa(int(i)), enveloped.FSM, bare.FSM)
	}
	if n := enveloped.fatalCount() + bare.fatalCount(); n != 0 {
		t.Fatalf("%d fatal entries", n)
	}
}
