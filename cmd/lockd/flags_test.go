package main

import (
	"bytes"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(strings.Fields("--node-id n1 --data-dir /d --http-addr 10.0.0.1:7001 --insecure " +
		"--raft-addr 10.0.0.1:7101 --gossip-addr 10.0.0.1:7201 --join 10.0.0.2:7201,10.0.0.3:7201 --bootstrap-expect 3"))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPAdvertise != "10.0.0.1:7001" || c.RaftAdvertise != "10.0.0.1:7101" || c.GossipAdvert != "10.0.0.1:7201" ||
		len(c.Join) != 2 || c.BootstrapExpect != 3 || c.RaftTiming != 1 || c.RaftLog != "" {
		t.Fatalf("config = %+v", c)
	}

	c, err = parseFlags([]string{"--dev"})
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeID != "dev" || c.HTTPAddr != "127.0.0.1:7001" || c.RaftAddr != "127.0.0.1:0" || c.RaftTiming != 0.1 {
		t.Fatalf("dev config = %+v", c)
	}
	c, err = parseFlags(strings.Fields("--dev --http-addr 0.0.0.0:7001 --insecure"))
	if err != nil || c.HTTPAdvertise != "127.0.0.1:7001" {
		t.Fatalf("dev in a container: %+v, %v", c, err)
	}

	if c, err = parseFlags(strings.Fields("--node-id n1 --data-dir /d --raft-log wal")); err != nil || c.RaftLog != "wal" {
		t.Fatalf("--raft-log wal: %+v, %v", c, err)
	}

	for _, bad := range []string{
		"--node-id n1 --data-dir /d --raft-log lsm",
		"--data-dir /d", // no id
		"--node-id n1",  // no data dir
		"--node-id n1 --data-dir /d --http-addr 0.0.0.0:7001 --insecure", // bind-all without advertise
		"--node-id n1 --data-dir /d --raft-addr :7101 --insecure",
		"--node-id n1 --data-dir /d --log-level loud",
		"--node-id n1 --data-dir /d --raft-timing 0",
		"--node-id n1 --data-dir /d extra",
		"--dev --join 127.0.0.1:7202",
	} {
		if _, err := parseFlags(strings.Fields(bad)); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

// keyFile writes a gossip key file of n bytes, base64 as
// lockd keygen prints it, and returns its path.
func keyFile(t *testing.T, n int) string {
	t.Helper()
	return writeFile(t, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, n))+"\n")
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSecurityFlags(t *testing.T) {
	const (
		base   = "--node-id n1 --data-dir /d "
		public = "--http-addr 10.0.0.1:7001 --raft-addr 10.0.0.1:7101 --gossip-addr 10.0.0.1:7201 "
		tls    = "--tls-ca ca.pem --tls-cert n1.pem --tls-key n1-key.pem "
	)
	key16, key24, key32 := keyFile(t, 16), keyFile(t, 24), keyFile(t, 32)
	short, notB64 := keyFile(t, 20), writeFile(t, "not base64!\n")
	for _, tc := range []struct {
		name, args string
		wantErr    string // "" means accepted; else a part of the error
	}{
		{"loopback defaults need nothing", base, ""},
		{"localhost needs nothing", base + "--http-addr localhost:7001", ""},
		{"::1 needs nothing", base + "--http-addr [::1]:7001", ""},
		{"dev on loopback stays plaintext", "--dev", ""},
		{"0.0.0.0 without TLS and without --insecure exits with an error",
			base + "--http-addr 0.0.0.0:7001 --http-advertise 10.0.0.1:7001", "--insecure"},
		{"0.0.0.0 says which flags to add",
			base + "--http-addr 0.0.0.0:7001 --http-advertise 10.0.0.1:7001", "add --tls-ca, --tls-cert, --tls-key and --gossip-key"},
		{"bind-all raft is refused", base + "--raft-addr :7101 --raft-advertise 10.0.0.1:7101", "--raft-addr :7101 is not a loopback address"},
		{"[::] gossip is refused", base + "--gossip-addr [::]:7201 --gossip-advertise 10.0.0.1:7201", "--gossip-addr [::]:7201"},
		{"a host name is not loopback", base + "--http-addr lockd.example:7001", "--http-addr lockd.example:7001"},
		{"a LAN address is refused", base + public, "--insecure"},
		{"TLS alone is not enough", base + public + tls, "add --gossip-key, or --insecure"},
		{"the gossip key alone is not enough", base + public + "--gossip-key " + key32, "add --tls-ca, --tls-cert and --tls-key, or --insecure"},
		{"TLS and a gossip key allow a LAN address", base + public + tls + "--gossip-key " + key32, ""},
		{"--insecure allows a LAN address", base + public + "--insecure", ""},
		{"dev on 0.0.0.0 needs --insecure", "--dev --http-addr 0.0.0.0:7001", "--insecure"},
		{"dev has no gossip to key", "--dev --http-addr 0.0.0.0:7001 " + tls, ""},
		{"TLS flags go together", base + "--tls-ca ca.pem --tls-cert n1.pem", "--tls-ca and --tls-cert given without --tls-key"},
		{"a lone --tls-key", base + "--tls-key k.pem", "--tls-key given without --tls-ca and --tls-cert"},
		{"--tls-client-auth needs TLS", base + "--tls-client-auth", "--tls-client-auth needs"},
		{"--tls-client-auth with TLS", base + tls + "--tls-client-auth", ""},
		{"16-byte gossip key", base + "--gossip-key " + key16, ""},
		{"24-byte gossip key", base + "--gossip-key " + key24, ""},
		{"20-byte gossip key", base + "--gossip-key " + short, "the key is 20 bytes"},
		{"gossip key not base64", base + "--gossip-key " + notB64, "not a base64 key"},
		{"gossip key file missing", base + "--gossip-key " + filepath.Join(t.TempDir(), "none"), "--gossip-key: open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(strings.Fields(tc.args))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("parseFlags(%q): %v", tc.args, err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("parseFlags(%q) accepted, want an error with %q", tc.args, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("parseFlags(%q): %v, want an error with %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

func TestSecurityFlagsParsed(t *testing.T) {
	key := keyFile(t, 32)
	c, err := parseFlags(strings.Fields("--node-id n1 --data-dir /d --tls-ca ca.pem --tls-cert n1.pem --tls-key n1-key.pem " +
		"--tls-client-auth --gossip-key " + key))
	if err != nil {
		t.Fatal(err)
	}
	if c.TLSCA != "ca.pem" || c.TLSCert != "n1.pem" || c.TLSKey != "n1-key.pem" || !c.TLSClientAuth || c.Insecure ||
		c.GossipKeyFile != key || !bytes.Equal(c.GossipKey, bytes.Repeat([]byte{0x5a}, 32)) {
		t.Fatalf("config = %+v", c)
	}
	if c, err = parseFlags(strings.Fields("--node-id n1 --data-dir /d --insecure")); err != nil || !c.Insecure || c.GossipKey != nil {
		t.Fatalf("--insecure: %+v, %v", c, err)
	}
}

// What lockd keygen prints is what --gossip-key reads.
func TestGossipKeyFromKeygen(t *testing.T) {
	var out bytes.Buffer
	if rc := keygen(nil, &out, io.Discard); rc != 0 {
		t.Fatalf("keygen exit %d", rc)
	}
	c, err := parseFlags(strings.Fields("--node-id n1 --data-dir /d --gossip-key " + writeFile(t, out.String())))
	if err != nil || len(c.GossipKey) != 32 {
		t.Fatalf("--gossip-key with keygen's key: %v, %d bytes", err, len(c.GossipKey))
	}
}

// The snapshot flags take their default from the environment (the
// compose file's LOCKD_SNAPSHOT_*, LOCKD_TRAILING_LOGS); the command line
// wins; a bad value is an error naming the variable.
func TestSnapshotFlagsFromEnv(t *testing.T) {
	t.Setenv("LOCKD_SNAPSHOT_THRESHOLD", "64")
	t.Setenv("LOCKD_TRAILING_LOGS", "32")
	t.Setenv("LOCKD_SNAPSHOT_INTERVAL", "1s")
	c, err := parseFlags([]string{"--node-id", "n1", "--data-dir", "/d", "--trailing-logs", "16"})
	if err != nil {
		t.Fatal(err)
	}
	if c.SnapshotThreshold != 64 || c.TrailingLogs != 16 || c.SnapshotInterval != time.Second {
		t.Fatalf("threshold %d, trailing %d, interval %v: want 64, 16 (command line), 1s", c.SnapshotThreshold, c.TrailingLogs, c.SnapshotInterval)
	}
	t.Setenv("LOCKD_TRAILING_LOGS", "many")
	if _, err := parseFlags([]string{"--node-id", "n1", "--data-dir", "/d"}); err == nil || !strings.Contains(err.Error(), "LOCKD_TRAILING_LOGS") {
		t.Fatalf("a bad $LOCKD_TRAILING_LOGS: %v", err)
	}
}
