package lockstate

import (
	"math/big"
	"reflect"
	"strings"
	"testing"
)

func TestCanonicalSerial(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"5c1f009a", "5c1f009a", true},
		{"5C:1F:00:9A", "5c1f009a", true},
		{"0x00ff", "ff", true},
		{"01", "1", true},
		{strings.Repeat("f", MaxSerialLen), strings.Repeat("f", MaxSerialLen), true},
		{"00" + strings.Repeat("f", MaxSerialLen), strings.Repeat("f", MaxSerialLen), true},
		{"", "", false},
		{"0", "", false},
		{"00:00", "", false},
		{"xyz", "", false},
		{"12 34", "", false},
		{"-1", "", false},
		{"1" + strings.Repeat("0", MaxSerialLen), "", false},
	}
	for _, c := range cases {
		got, err := CanonicalSerial(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("CanonicalSerial(%q) = %q, %v; want %q, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestDenyCertValidate(t *testing.T) {
	cases := map[string]*DenyCert{
		"not canonical":     {Serial: "0A"},
		"leading zero":      {Serial: "0a"},
		"zero":              {Serial: "0"},
		"not hex":           {Serial: "zz"},
		"control in reason": {Serial: "a", Reason: "a\nb"},
		"C1 in reason":      {Serial: "a", Reason: "a\u0085b"},
		"long reason":       {Serial: "a", Reason: strings.Repeat("r", MaxDenyReason+1)},
		"bad auth":          {Serial: "a", Authority: Authority{Auth: "root"}},
	}
	for name, c := range cases {
		d := aclDriver(t)
		d.refused(c, CodeInvalid)
		if len(d.tab.DeniedCerts()) != 0 {
			t.Errorf("%s: denied %v", name, d.tab.DeniedCerts())
		}
	}
}

func TestDenyCert(t *testing.T) {
	d := aclDriver(t)
	byAdmin := Authority{Auth: tokenID(admin)}
	d.must(&DenyCert{Authority: byAdmin, Serial: "5c1f009a", Reason: "laptop stolen"})
	first := d.index
	if !d.tab.CertDenied(big.NewInt(0x5c1f009a)) {
		t.Fatal("the denied serial is not denied")
	}
	for _, s := range []*big.Int{nil, big.NewInt(0x5c1f009b), big.NewInt(-0x5c1f009a), big.NewInt(0)} {
		if d.tab.CertDenied(s) {
			t.Fatalf("serial %v denied", s)
		}
	}
	// Idempotent: the first denial, its reason and index stay.
	before := d.tab.Digest()
	d.must(&DenyCert{Authority: byAdmin, Serial: "5c1f009a", Reason: "again"})
	if d.tab.Digest() != before {
		t.Fatal("denying a denied serial again changed the table")
	}
	// Without a token: the node vouched for an operator's certificate.
	d.must(&DenyCert{Serial: "1"})
	want := []DeniedCert{{Serial: "1", Index: first + 2}, {Serial: "5c1f009a", Reason: "laptop stolen", Index: first}}
	if got := d.tab.DeniedCerts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("deny list %+v, want %+v", got, want)
	}
}

func TestDenyCertManagementOnly(t *testing.T) {
	d := aclDriver(t)
	d.refused(&DenyCert{Authority: Authority{Auth: tokenID(jobs)}, Serial: "ab"}, CodeForbidden)
	d.refused(&DenyCert{Authority: Authority{Auth: tokenID(99)}, Serial: "ab"}, CodeUnauthorized)
	if d.tab.CertDenied(big.NewInt(0xab)) {
		t.Fatal("a refused denial denied")
	}
}

func TestDenyCertLimit(t *testing.T) {
	d := newDriver(t)
	for i := range MaxDeniedCerts {
		d.must(&DenyCert{Serial: big.NewInt(int64(i + 1)).Text(16)})
	}
	d.refused(&DenyCert{Serial: "fffffff"}, CodeLimit)
	d.must(&DenyCert{Serial: "1"}) // already there: still no error
}

func TestDenyListSurvivesExportAndLoad(t *testing.T) {
	d := aclDriver(t)
	plain := d.tab.Digest()
	for _, s := range []string{"ff", "1", "abc"} { // not in serial order
		d.must(&DenyCert{Authority: Authority{Auth: tokenID(admin)}, Serial: s, Reason: "r" + s})
	}
	if d.tab.Digest() == plain {
		t.Fatal("the digest does not cover the deny list")
	}
	loaded := reload(t, d.tab)
	if loaded.Digest() != d.tab.Digest() {
		t.Fatal("digest differs after export and load")
	}
	if !reflect.DeepEqual(loaded.DeniedCerts(), d.tab.DeniedCerts()) {
		t.Fatalf("deny list %+v after load, want %+v", loaded.DeniedCerts(), d.tab.DeniedCerts())
	}
	var serials []string
	_ = d.tab.Export(func(rec Record) error {
		if r, ok := rec.(*DeniedCertRecord); ok {
			serials = append(serials, r.Serial)
		}
		return nil
	})
	if !reflect.DeepEqual(serials, []string{"1", "abc", "ff"}) {
		t.Fatalf("exported serials %v, want them in order", serials)
	}
	d.tab = loaded
	d.must(&DenyCert{Serial: "ff"}) // still denied: no change, no error
}

func TestDenyListLoadRefusesBadRecords(t *testing.T) {
	for name, rec := range map[string]DeniedCertRecord{
		"not canonical": {Serial: "0ab"},
		"bad reason":    {Serial: "ab", Reason: "\x00"},
	} {
		l, err := NewLoader(Header{Format: FormatVersion})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Load(&rec); err == nil {
			t.Errorf("%s: loaded %+v", name, rec)
		}
	}
	l, _ := NewLoader(Header{Format: FormatVersion})
	if err := l.Load(&DeniedCertRecord{Serial: "ab"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Load(&DeniedCertRecord{Serial: "ab"}); err == nil {
		t.Fatal("a serial loaded twice")
	}
}
