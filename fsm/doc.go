// Package fsm is the hashicorp/raft finite state machine around the
// lockstate lock table.
//
// Every log entry is one command: a type byte followed by a msgpack array
// [now, body], where now is the leader's timestamp (Unix nanoseconds) and
// body is the lockstate command (see Encode). FSM.Apply decodes the entry,
// applies it to the table at the entry's index and time, and returns the
// table's *lockstate.Result to the proposer. An entry that does not decode
// means the binary and the log disagree: the node stops loudly rather than
// diverge.
//
// Readers look at the table under a read lock (FSM.Read), wait for the
// FSM's own applied index (FSM.WaitApplied, FSM.Changed) and follow what
// each entry changed (FSM.Subscribe). Snapshots are a msgpack stream of
// the table's export records; Restore rebuilds a new table and swaps it in
// only once the whole stream has been read.
package fsm
