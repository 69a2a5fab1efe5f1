// Package raftnode owns a lockd node's Raft instance (hashicorp/raft): its
// stores, snapshots, the TCP transport, proposing commands (stamped with
// the leader's clock, forwarded from followers to the leader),
// linearizable reads, and the leader's duties (session keepalive
// deadlines, expiry, ticks for the table's deadlines).
//
// The raft log of a new data dir is in hashicorp/raft-wal (LogWAL, the
// default: segment files under wal/, one fsync per batch of entries).
// With --raft-log bolt (LogBolt), or in a data dir made before raft-wal
// was the default, it is in raft-boltdb/v2's raft.db. raft.db always holds
// the stable store (term and vote) and the record of which log store the
// data dir uses: a data dir keeps the one it was made with (store.go).
// Before bolt opens raft.db, internal/boltcheck checks its pages, and the
// log entries raft reads at startup are read back and checked first
// (checkLog): a damaged store stops the node with an error that says what
// to do, not a crash.
package raftnode
