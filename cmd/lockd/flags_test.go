package main

import (
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(strings.Fields("--node-id n1 --data-dir /d --http-addr 10.0.0.1:7001 " +
		"--raft-addr 10.0.0.1:7101 --gossip-addr 10.0.0.1:7201 --join 10.0.0.2:7201,10.0.0.3:7201 --bootstrap-expect 3"))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAdvertise != "10.0.0.1:7001" || c.RaftAdvertise != "10.0.0.1:7101" || c.GossipAdvert != "10.0.0.1:7201" ||
		len(c.Join) != 2 || c.BootstrapExpect != 3 || c.RaftTiming != 1 {
		t.Fatalf("config = %+v", c)
	}

	c, err = parseFlags([]string{"--dev"})
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != "dev" || c.HTTPAddr != "127.0.0.1:7001" || c.RaftAddr != "127.0.0.1:0" || c.RaftTiming != 0.1 {
		t.Fatalf("dev config = %+v", c)
	}
	c, err = parseFlags(strings.Fields("--dev --http-addr 0.0.0.0:7001"))
	if err != nil || c.HTTPAdvertise != "127.0.0.1:7001" {
		t.Fatalf("dev in a container: %+v, %v", c, err)
	}

	for _, bad := range []string{
		"--data-dir /d", // no id
		"--node-id n1",  // no data dir
		"--node-id n1 --data-dir /d --http-addr 0.0.0.0:7001", // bind-all without advertise
		"--node-id n1 --data-dir /d --raft-addr :7101",
		"--node-id n1 --data-dir /d --log-level loud",
		"--node-id n1 --data-dir /d --raft-timing 0",
		"--node-id n1 --data-dir /d extra",
		"--dev --join 127.0.0.1:7202",
		"--node-id n1 --data-dir /d --unsafe yes",
	} {
		if _, err := parseFlags(strings.Fields(bad)); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

func TestUnsafeFromEnvironment(t *testing.T) {
	t.Setenv(envUnsafe, unsafeNoConsensus)
	c, err := parseFlags(strings.Fields("--node-id n1 --data-dir /d"))
	if err != nil || c.Unsafe != unsafeNoConsensus {
		t.Fatalf("unsafe from env: %+v, %v", c, err)
	}
	t.Setenv(envUnsafe, "")
	if c, err = parseFlags(strings.Fields("--node-id n1 --data-dir /d")); err != nil || c.Unsafe != "" {
		t.Fatalf("unsafe by default: %+v, %v", c, err)
	}
}
