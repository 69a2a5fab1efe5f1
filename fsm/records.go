package fsm

import (
	"github.com/lockd/lockd/lockstate"
)

// Snapshot records are written and read by hand, like commands (see
// wire.go): msgpack's reflection encoder and decoder cost several seconds
// on a table of a million locks, most of a restore. The stream is what
// msgpack itself writes for these types with UseCompactInts, maps keyed by
// the records' msgpack tags in field order; TestRecordCodec checks both
// directions against the library on random records with every field set,
// so a field added to or renamed in lockstate fails it until it is added
// here. Records carry no omitempty fields, so every map must hold exactly
// its type's fields; LockSpec, shared with commands, omits zero weights and
// limits and is read by decodeLockSpec.

// Minimum encoded sizes, for bounding a declared element count by the bytes
// left: a record with every field zero is its smallest encoding.
var (
	minHoldSize  = len(appendHold(nil, &lockstate.HoldRecord{}))
	minGrantSize = len(appendGrant(nil, &lockstate.Grant{}))
)

func appendSnapshotHeader(b []byte, h *snapshotHeader) []byte {
	b = appendMapLen(b, 2)
	b = appendInt(appendStr(b, "format"), int64(h.Format))
	return appendUint(appendStr(b, "applied"), h.Applied)
}

func decodeSnapshotHeader(r *mpReader, h *snapshotHeader) error {
	return r.readFields(2, func(k []byte) (uint32, error) {
		switch string(k) {
		case "format":
			return 1 << 0, readInt(r, &h.Format)
		case "applied":
			return 1 << 1, readUint(r, &h.Applied)
		}
		return 0, nil
	})
}

// snapshotTrailer ends a format 2 snapshot, after recEnd.
type snapshotTrailer struct {
	Records uint64 `msgpack:"records"` // records before recEnd, the header and table header included
}

func appendTrailer(b []byte, t *snapshotTrailer) []byte {
	return appendUint(appendStr(appendMapLen(b, 1), "records"), t.Records)
}

func decodeTrailer(r *mpReader, t *snapshotTrailer) error {
	return r.readFields(1, func(k []byte) (uint32, error) {
		if string(k) == "records" {
			return 1 << 0, readUint(r, &t.Records)
		}
		return 0, nil
	})
}

func appendTableHeader(b []byte, h *lockstate.Header) []byte {
	b = appendMapLen(b, 8)
	b = appendInt(appendStr(b, "format"), int64(h.Format))
	b = appendUint(appendStr(b, "index"), h.Index)
	b = appendInt(appendStr(b, "clock"), h.Clock)
	b = appendUint(appendStr(b, "seq"), h.Seq)
	b = appendUint(appendStr(b, "forgotten"), h.Forgotten)
	b = appendInt(appendStr(b, "sessions"), int64(h.Sessions))
	b = appendInt(appendStr(b, "nodes"), int64(h.Nodes))
	return appendInt(appendStr(b, "requests"), int64(h.Requests))
}

func decodeTableHeader(r *mpReader, h *lockstate.Header) error {
	return r.readFields(8, func(k []byte) (uint32, error) {
		switch string(k) {
		case "format":
			return 1 << 0, readInt(r, &h.Format)
		case "index":
			return 1 << 1, readUint(r, &h.Index)
		case "clock":
			return 1 << 2, readInt(r, &h.Clock)
		case "seq":
			return 1 << 3, readUint(r, &h.Seq)
		case "forgotten":
			return 1 << 4, readUint(r, &h.Forgotten)
		case "sessions":
			return 1 << 5, readInt(r, &h.Sessions)
		case "nodes":
			return 1 << 6, readInt(r, &h.Nodes)
		case "requests":
			return 1 << 7, readInt(r, &h.Requests)
		}
		return 0, nil
	})
}

func appendSession(b []byte, s *lockstate.SessionRecord) []byte {
	b = appendMapLen(b, 7)
	b = appendUint(appendStr(b, "id"), uint64(s.ID))
	b = appendStr(appendStr(b, "name"), s.Name)
	b = appendInt(appendStr(b, "ttl"), int64(s.TTL))
	b = appendStr(appendStr(b, "on_deadlock"), string(s.OnDeadlock))
	b = appendBool(appendStr(b, "ordered"), s.Ordered)
	b = appendInt(appendStr(b, "lock_delay"), int64(s.LockDelay))
	return appendSlice(appendStr(b, "done"), s.Done, func(b []byte, id *string) []byte { return appendStr(b, *id) })
}

func decodeSession(r *mpReader, s *lockstate.SessionRecord) error {
	return r.readFields(7, func(k []byte) (uint32, error) {
		switch string(k) {
		case "id":
			return 1 << 0, readUint(r, &s.ID)
		case "name":
			return 1 << 1, readString(r, &s.Name)
		case "ttl":
			return 1 << 2, readInt(r, &s.TTL)
		case "on_deadlock":
			return 1 << 3, readString(r, &s.OnDeadlock)
		case "ordered":
			return 1 << 4, readBool(r, &s.Ordered)
		case "lock_delay":
			return 1 << 5, readInt(r, &s.LockDelay)
		case "done":
			return 1 << 6, readList(r, &s.Done, 1, func(id *string) error { return readString(r, id) })
		}
		return 0, nil
	})
}

func appendNode(b []byte, n *lockstate.NodeRecord) []byte {
	b = appendMapLen(b, 5)
	b = appendStr(appendStr(b, "name"), n.Name)
	b = appendUint(appendStr(b, "version"), n.Version)
	b = appendInt(appendStr(b, "limit"), int64(n.Limit))
	b = appendInt(appendStr(b, "delay_until"), n.DelayUntil)
	return appendSlice(appendStr(b, "holds"), n.Holds, appendHold)
}

// decodeNode decodes a node record into n, reusing n.Holds's array when it
// is large enough: the loader copies holds out of the record, and reusing
// saves an allocation per lock on a restore.
func decodeNode(r *mpReader, n *lockstate.NodeRecord) error {
	return r.readFields(5, func(k []byte) (uint32, error) {
		switch string(k) {
		case "name":
			return 1 << 0, readString(r, &n.Name)
		case "version":
			return 1 << 1, readUint(r, &n.Version)
		case "limit":
			return 1 << 2, readInt(r, &n.Limit)
		case "delay_until":
			return 1 << 3, readInt(r, &n.DelayUntil)
		case "holds":
			return 1 << 4, readList(r, &n.Holds, minHoldSize, func(h *lockstate.HoldRecord) error { return decodeHold(r, h) })
		}
		return 0, nil
	})
}

func appendHold(b []byte, h *lockstate.HoldRecord) []byte {
	b = appendMapLen(b, 7)
	b = appendUint(appendStr(b, "session"), uint64(h.Session))
	b = appendUint(appendStr(b, "mode"), uint64(h.Mode))
	b = appendInt(appendStr(b, "weight"), int64(h.Weight))
	b = appendInt(appendStr(b, "count"), int64(h.Count))
	b = appendUint(appendStr(b, "token"), h.Token)
	b = appendInt(appendStr(b, "expires"), h.Expires)
	return appendUint(appendStr(b, "granted"), h.Granted)
}

func decodeHold(r *mpReader, h *lockstate.HoldRecord) error {
	return r.readFields(7, func(k []byte) (uint32, error) {
		switch string(k) {
		case "session":
			return 1 << 0, readUint(r, &h.Session)
		case "mode":
			return 1 << 1, readUint(r, &h.Mode)
		case "weight":
			return 1 << 2, readInt(r, &h.Weight)
		case "count":
			return 1 << 3, readInt(r, &h.Count)
		case "token":
			return 1 << 4, readUint(r, &h.Token)
		case "expires":
			return 1 << 5, readInt(r, &h.Expires)
		case "granted":
			return 1 << 6, readUint(r, &h.Granted)
		}
		return 0, nil
	})
}

func appendRequest(b []byte, q *lockstate.RequestRecord) []byte {
	b = appendMapLen(b, 15)
	b = appendStr(appendStr(b, "id"), q.ID)
	b = appendUint(appendStr(b, "session"), uint64(q.Session))
	b = appendUint(appendStr(b, "seq"), q.Seq)
	b = appendSlice(appendStr(b, "locks"), q.Locks, appendLockSpec)
	b = appendStr(appendStr(b, "require"), string(q.Require))
	b = appendInt(appendStr(b, "need"), int64(q.Need))
	b = appendInt(appendStr(b, "hold_ttl"), int64(q.HoldTTL))
	b = appendInt(appendStr(b, "deadline"), q.Deadline)
	b = appendInt(appendStr(b, "restore"), int64(q.Restore))
	b = appendStr(appendStr(b, "status"), string(q.Status))
	b = appendUint(appendStr(b, "token"), q.Token)
	b = appendSlice(appendStr(b, "granted"), q.Granted, appendGrant)
	b = appendUint(appendStr(b, "created"), q.Created)
	b = appendUint(appendStr(b, "ended"), q.Ended)
	return appendSlice(appendStr(b, "upgrade"), q.Upgrade, func(b []byte, u *bool) []byte { return appendBool(b, *u) })
}

// decodeRequest decodes a request record into q, which must be zero: the
// loader keeps its Locks and Granted.
func decodeRequest(r *mpReader, q *lockstate.RequestRecord) error {
	return r.readFields(15, func(k []byte) (uint32, error) {
		switch string(k) {
		case "id":
			return 1 << 0, readString(r, &q.ID)
		case "session":
			return 1 << 1, readUint(r, &q.Session)
		case "seq":
			return 1 << 2, readUint(r, &q.Seq)
		case "locks":
			return 1 << 3, readList(r, &q.Locks, 1, func(sp *lockstate.LockSpec) error { return decodeLockSpec(r, sp) })
		case "require":
			return 1 << 4, readString(r, &q.Require)
		case "need":
			return 1 << 5, readInt(r, &q.Need)
		case "hold_ttl":
			return 1 << 6, readInt(r, &q.HoldTTL)
		case "deadline":
			return 1 << 7, readInt(r, &q.Deadline)
		case "restore":
			return 1 << 8, readInt(r, &q.Restore)
		case "status":
			return 1 << 9, readString(r, &q.Status)
		case "token":
			return 1 << 10, readUint(r, &q.Token)
		case "granted":
			return 1 << 11, readList(r, &q.Granted, minGrantSize, func(g *lockstate.Grant) error { return decodeGrant(r, g) })
		case "created":
			return 1 << 12, readUint(r, &q.Created)
		case "ended":
			return 1 << 13, readUint(r, &q.Ended)
		case "upgrade":
			return 1 << 14, readList(r, &q.Upgrade, 1, func(u *bool) error { return readBool(r, u) })
		}
		return 0, nil
	})
}

// appendLockSpec writes a LockSpec as commands carry it: weight and limit
// are omitempty.
func appendLockSpec(b []byte, sp *lockstate.LockSpec) []byte {
	n := 2
	if sp.Weight != 0 {
		n++
	}
	if sp.Limit != 0 {
		n++
	}
	b = appendMapLen(b, n)
	b = appendStr(appendStr(b, "name"), sp.Name)
	b = appendUint(appendStr(b, "mode"), uint64(sp.Mode))
	if sp.Weight != 0 {
		b = appendInt(appendStr(b, "weight"), int64(sp.Weight))
	}
	if sp.Limit != 0 {
		b = appendInt(appendStr(b, "limit"), int64(sp.Limit))
	}
	return b
}

func appendGrant(b []byte, g *lockstate.Grant) []byte {
	b = appendMapLen(b, 4)
	b = appendStr(appendStr(b, "name"), g.Name)
	b = appendUint(appendStr(b, "mode"), uint64(g.Mode))
	b = appendInt(appendStr(b, "weight"), int64(g.Weight))
	return appendUint(appendStr(b, "token"), g.Token)
}

func decodeGrant(r *mpReader, g *lockstate.Grant) error {
	return r.readFields(4, func(k []byte) (uint32, error) {
		switch string(k) {
		case "name":
			return 1 << 0, readString(r, &g.Name)
		case "mode":
			return 1 << 1, readUint(r, &g.Mode)
		case "weight":
			return 1 << 2, readInt(r, &g.Weight)
		case "token":
			return 1 << 3, readUint(r, &g.Token)
		}
		return 0, nil
	})
}
