package history

import (
	"path/filepath"
	"strings"
	"testing"
)

// A read keeps its last ReadTail values and their count, as recorded and
// as read back from a history written before reads were trimmed.
func TestReadsAreTrimmed(t *testing.T) {
	whole := make([]int64, 100)
	for i := range whole {
		whole[i] = int64(i + 1)
	}
	check := func(how string, e Event) {
		t.Helper()
		if len(e.Read) != ReadTail || e.Read[0] != 100-ReadTail+1 || e.Read[ReadTail-1] != 100 || e.ReadLen != 100 {
			t.Errorf("%s: read %v, read_len %d; want the last %d of 100", how, e.Read, e.ReadLen, ReadTail)
		}
	}
	path := filepath.Join(t.TempDir(), "history.jsonl")
	r, err := NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	check("recorded", r.Add(Event{Type: OK, F: ResRead, Read: whole}))
	r.Add(Event{Type: OK, F: ResRead, Read: []int64{1, 2}})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	events, err := ReadFile(path)
	if err != nil || len(events) != 2 {
		t.Fatalf("read back: %d events, %v", len(events), err)
	}
	check("written", events[0])
	if len(events[1].Read) != 2 || events[1].ReadLen != 0 {
		t.Errorf("a short read changed: %+v", events[1])
	}

	old := `{"index":0,"type":"ok","f":"` + ResRead + `","read":[` + strings.Trim(strings.Join(strings.Fields(strings.Trim(strings.Repeat("7 ", 99)+"100", " ")), ","), ",") + `]}`
	events, err = Read(strings.NewReader(old + "\n"))
	if err != nil || len(events) != 1 {
		t.Fatalf("an old history: %d events, %v", len(events), err)
	}
	if e := events[0]; len(e.Read) != ReadTail || e.ReadLen != 100 || e.Read[ReadTail-1] != 100 {
		t.Errorf("an old history's read: %v, read_len %d", e.Read, e.ReadLen)
	}
}
