package compose

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lockd/lockd/raftnode/certs"
)

func TestAddresses(t *testing.T) {
	c := &Cluster{Nodes: 5, Subnet: "10.77.50", PortPrefix: "175"}
	if got := c.Names(); !reflect.DeepEqual(got, []string{"n1", "n2", "n3", "n4", "n5"}) {
		t.Fatal(got)
	}
	if c.IP("n4") != "10.77.50.14" || c.HTTPAddr("n2") != "127.0.0.1:1752" || c.NodeByIP("10.77.50.13") != "n3" {
		t.Fatal(c.IP("n4"), c.HTTPAddr("n2"))
	}
	d := &Cluster{}
	if len(d.Names()) != 3 || d.IP("n1") != "10.77.0.11" || d.HTTPAddr("n3") != "127.0.0.1:7003" || d.IP("x") != "" {
		t.Fatal(d.IP("n1"), d.HTTPAddr("n3"))
	}
	if a := c.composeArgs("up"); !reflect.DeepEqual(a, []string{"-f", "docker-compose.yml", "-f", LayerFile, "-p", "lockd", "--profile", "five", "up"}) {
		t.Fatal(a)
	}
}

func st(id, state, leader string, term uint64) *Status {
	s := &Status{NodeID: id, State: state, Term: term}
	s.Leader.ID = leader
	return s
}

func TestLeaderOf(t *testing.T) {
	m := map[string]*Status{"n1": st("n1", "leader", "n1", 2), "n2": st("n2", "follower", "n1", 2), "n3": nil}
	if l := leaderOf(m, 3); l != "n1" {
		t.Fatal(l)
	}
	// no majority: the self-declared leader with the highest term
	m = map[string]*Status{"n1": st("n1", "leader", "n1", 2), "n2": st("n2", "leader", "n2", 3), "n3": nil}
	if l := leaderOf(m, 3); l != "n2" {
		t.Fatal(l)
	}
	if l := leaderOf(map[string]*Status{"n1": nil}, 3); l != "" {
		t.Fatal(l)
	}
}

func TestReplacedIDs(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Subnet: "10.77.50", CertsDir: dir}
	if c.ID("n2") != "n2" || c.NodeByID("n2") != "n2" {
		t.Fatal(c.ID("n2"), c.NodeByID("n2"))
	}
	if err := c.issueNodeCert("n2", "n2-r1"); err != nil {
		t.Fatal(err)
	}
	c.ids = map[string]string{"n2": "n2-r1"}
	if c.ID("n2") != "n2-r1" || c.NodeByID("n2-r1") != "n2" || c.NodeByID("n2") != "" {
		t.Fatal(c.ID("n2"), c.NodeByID("n2-r1"), c.NodeByID("n2"))
	}
	if !slices.Contains(c.Environ(), "LOCKD_ID_N2=n2-r1") {
		t.Fatal("LOCKD_ID_N2 not in the environment")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "n2-r1.pem"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "n2-r1" || !slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.String() == "10.77.50.12" }) {
		t.Fatal(cert.Subject.CommonName, cert.IPAddresses)
	}
	if err := c.issueNodeCert("n2", "n2-r1"); err != nil { // issued already: kept
		t.Fatal(err)
	}

	leader := st("n2-r1", "leader", "n2-r1", 4)
	leader.Members = []Member{{ID: "n1", Voter: true}, {ID: "n2-r1", Voter: true}, {ID: "n3", Voter: true}}
	if err := c.checkVoters(leader); err != nil {
		t.Fatal(err)
	}
	leader.Members[1].ID = "n2" // the id n2 was replaced from
	if err := c.checkVoters(leader); err == nil || !strings.Contains(err.Error(), "no node runs as") {
		t.Fatal(err)
	}
}

// readRepo reads a file of the repository (two levels up).
func readRepo(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The suite's layer puts every service of docker-compose.yml on the
// suite's image and passes the suite's flags to every node, and
// BuildImage's binary gets into the image's build context.
func TestLayerFile(t *testing.T) {
	base, layer := readRepo(t, "docker-compose.yml"), readRepo(t, LayerFile)
	i, j := strings.Index(base, "\nservices:\n"), strings.Index(base, "\nnetworks:\n")
	if i < 0 || j < i {
		t.Fatal("docker-compose.yml: no services: section before networks:")
	}
	names := regexp.MustCompile(`(?m)^  ([a-z0-9]+):$`).FindAllStringSubmatch(base[i:j], -1)
	if len(names) < 4 {
		t.Fatalf("docker-compose.yml: services %q", names)
	}
	for _, m := range names {
		name := m[1]
		k := strings.Index(layer, "\n  "+name+":\n")
		if k < 0 {
			t.Errorf("%s: no service %s", LayerFile, name)
			continue
		}
		block := layer[k+1:]
		if end := regexp.MustCompile(`\n  [a-z]`).FindStringIndex(block); end != nil {
			block = block[:end[0]]
		}
		if !strings.Contains(block, DefaultImage) {
			t.Errorf("%s: service %s does not run %s:\n%s", LayerFile, name, DefaultImage, block)
		}
		if name != "certs" && !strings.Contains(block, "environment: *jepsen-env") {
			t.Errorf("%s: node %s does not take the suite's flags:\n%s", LayerFile, name, block)
		}
	}
	for _, v := range []string{"LOCKD_UNSAFE", "LOCKD_TEST_CLOCK_HOOK"} {
		if !strings.Contains(layer, v+`: "${`+v+`:-}"`) {
			t.Errorf("%s does not pass %s", LayerFile, v)
		}
	}
	if !slices.Contains(strings.Fields(readRepo(t, ".dockerignore")), "!"+faultsBinary) {
		t.Errorf(".dockerignore keeps %s out of the image's build context", faultsBinary)
	}
}
