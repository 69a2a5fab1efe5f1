package fsm

import (
	"reflect"
	"testing"
)

func FuzzDecode(f *testing.F) {
	for _, cmd := range sampleCommands() {
		for _, now := range []int64{0, 1_700_000_000_000_000_000, -5} {
			b, err := Encode(now, cmd)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte{})
	f.Add([]byte{byte(IgnoreUnknownFlag | 9), 0x92, 0x00, 0x80})
	f.Add([]byte{byte(AcquireType), 0x92, 0x05, 0x81, 0xa5, 'l', 'o', 'c', 'k', 's', 0xdd, 0xff, 0xff, 0xff, 0xff})
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
