// Temporary: pins the cluster dependencies in go.mod until raftnode and
// cluster import them for real. Delete once they do.
package raftnode

import (
	_ "github.com/hashicorp/memberlist"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "github.com/prometheus/client_golang/prometheus"
)
