package compose

import (
	"reflect"
	"testing"
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
	if a := c.composeArgs("up"); !reflect.DeepEqual(a, []string{"-p", "lockd", "--profile", "five", "up"}) {
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
