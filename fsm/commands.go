package fsm

import (
	"github.com/lockd/lockd/lockstate"
)

// The decoders below read each command's map by the msgpack tags of its
// lockstate type. TestCodecEveryField encodes every command with every
// field set through those tags, so a field added to or renamed in
// lockstate fails it until it is added here.

func decodeCreateSession(b []byte) (lockstate.Command, []byte, error) {
	c, r := new(lockstate.CreateSession), &mpReader{b: b}
	err := r.readStruct(5, func(k []byte) (bool, error) {
		switch string(k) {
		case "name":
			return true, readString(r, &c.Name)
		case "ttl":
			return true, readInt(r, &c.TTL)
		case "on_deadlock":
			return true, readString(r, &c.OnDeadlock)
		case "ordered":
			return true, readBool(r, &c.Ordered)
		case "lock_delay":
			return true, readInt(r, &c.LockDelay)
		}
		return false, nil
	})
	return c, r.left(), err
}

func decodeCloseSession(b []byte) (lockstate.Command, []byte, error) {
	c, r := new(lockstate.CloseSession), &mpReader{b: b}
	err := r.readStruct(1, func(k []byte) (bool, error) {
		if string(k) == "session" {
			return true, readUint(r, &c.Session)
		}
		return false, nil
	})
	return c, r.left(), err
}

func decodeExpireSession(b []byte) (lockstate.Command, []byte, error) {
	c, r := new(lockstate.ExpireSession), &mpReader{b: b}
	err := r.readStruct(1, func(k []byte) (bool, error) {
		if string(k) == "session" {
			return true, readUint(r, &c.Session)
		}
		return false, nil
	})
	return c, r.left(), err
}

func decodeAcquire(b []byte) (lockstate.Command, []byte, error) {
	c, r := new(lockstate.Acquire), &mpReader{b: b}
	err := r.readStruct(6, func(k []byte) (bool, error) {
		switch string(k) {
		case "session":
			return true, readUint(r, &c.Session)
		case "request_id":
			return true, readString(r, &c.RequestID)
		case "locks":
			return true, readSlice(r, &c.Locks, func(sp *lockstate.LockSpec) error { return decodeLockSpec(r, sp) })
		case "require":
			return true, readString(r, &c.Require)
		case "wait":
			return true, readInt(r, &c.Wait)
		case "hold_ttl":
			return true, readInt(r, &c.HoldTTL)
		}
		return false, nil
	})
	return c, r.left(), err
}

func decodeLockSpec(r *mpReader, sp *lockstate.LockSpec) error {
	return r.readStruct(4, func(k []byte) (bool, error) {
		switch string(k) {
		case "name":
			return true, readString(r, &sp.Name)
		case "mode":
			return true, readUint(r, &sp.Mode)
		case "weight":
			return true, readInt(r, &sp.Weight)
		case "limit":
			return true, readInt(r, &sp.Limit)
		}
		return false, nil
	})
}

func decodeRelease(b []byte) (lockstate.Command, []byte, error) {
	c, r := new(lockstate.Release), &mpReader{b: b}
	err := r.readStruct(3, func(k []byte) (bool, error) {
		switch string(k) {
		case "session":
			return true, readUint(r, &c.Session)
		case "name":
			return true, readString(r, &c.Name)
		case "request_id":
			return true, readString(r, &c.RequestID)
		}
		return false, nil
	})
	return c, r.left(), err
}

func decodeSurrender(b []byte) (lockstate.Command, []byte, error) {
	c, r := new(lockstate.Surrender), &mpReader{b: b}
	err := r.readStruct(2, func(k []byte) (bool, error) {
		switch string(k) {
		case "session":
			return true, readUint(r, &c.Session)
		case "name":
			return true, readString(r, &c.Name)
		}
		return false, nil
	})
	return c, r.left(), err
}

func decodeCancel(b []byte) (lockstate.Command, []byte, error) {
	c, r := new(lockstate.Cancel), &mpReader{b: b}
	err := r.readStruct(2, func(k []byte) (bool, error) {
		switch string(k) {
		case "session":
			return true, readUint(r, &c.Session)
		case "request_id":
			return true, readString(r, &c.RequestID)
		}
		return false, nil
	})
	return c, r.left(), err
}

func decodeTick(b []byte) (lockstate.Command, []byte, error) {
	r := &mpReader{b: b}
	err := r.readStruct(0, func([]byte) (bool, error) { return false, nil })
	return new(lockstate.Tick), r.left(), err
}
