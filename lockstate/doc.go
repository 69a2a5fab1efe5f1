// Package lockstate is the lock table that every lockd node runs: a pure,
// deterministic state machine. Commands go in through Table.Apply together
// with the Raft index and the leader's timestamp that stamped them; a Result
// and a list of Events come out. The package does no I/O, reads no clock,
// draws no random numbers and starts no goroutines, and never lets Go's map
// order reach a result, so the same log yields the same table, results and
// Digest on every node.
//
// Each command is a type with a Validate method, which checks its content
// alone (the API calls it to refuse a bad request before proposing it,
// Apply calls it again), and an apply method, which carries it out against
// the table.
//
// The semantics (hierarchical names, read/write modes, semaphores, sessions,
// reentrancy, fair FIFO queues, multi-lock requests, deadlock detection,
// ordered locking, fencing tokens, hold TTLs and lock-delay) are described
// in docs/architecture.md.
package lockstate
