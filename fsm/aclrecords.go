package fsm

import (
	"github.com/lockd/lockd/lockstate"
)

// The records snapshot format 3 adds (see SnapshotFormat), written and
// read by hand like the others in records.go.

func appendSessionExtra(b []byte, x *lockstate.SessionExtraRecord) []byte {
	b = appendMapLen(b, 4)
	b = appendUint(appendStr(b, "session"), uint64(x.Session))
	b = appendStr(appendStr(b, "key"), x.Key)
	b = appendStr(appendStr(b, "owner"), x.Owner)
	return appendSlice(appendStr(b, "revoked"), x.Revoked, appendRevocation)
}

func decodeSessionExtra(r *mpReader, x *lockstate.SessionExtraRecord) error {
	return r.readFields(4, func(k []byte) (uint32, error) {
		switch string(k) {
		case "session":
			return 1 << 0, readUint(r, &x.Session)
		case "key":
			return 1 << 1, readString(r, &x.Key)
		case "owner":
			return 1 << 2, readString(r, &x.Owner)
		case "revoked":
			return 1 << 3, readList(r, &x.Revoked, minRevocationSize, func(rv *lockstate.Revocation) error { return decodeRevocation(r, rv) })
		}
		return 0, nil
	})
}

var minRevocationSize = len(appendRevocation(nil, &lockstate.Revocation{}))

func appendRevocation(b []byte, rv *lockstate.Revocation) []byte {
	b = appendMapLen(b, 3)
	b = appendStr(appendStr(b, "name"), rv.Name)
	b = appendUint(appendStr(b, "token"), rv.Token)
	return appendUint(appendStr(b, "index"), rv.Index)
}

func decodeRevocation(r *mpReader, rv *lockstate.Revocation) error {
	return r.readFields(3, func(k []byte) (uint32, error) {
		switch string(k) {
		case "name":
			return 1 << 0, readString(r, &rv.Name)
		case "token":
			return 1 << 1, readUint(r, &rv.Token)
		case "index":
			return 1 << 2, readUint(r, &rv.Index)
		}
		return 0, nil
	})
}

func appendACL(b []byte, a *lockstate.ACLRecord) []byte {
	return appendUint(appendStr(appendMapLen(b, 1), "bootstrapped"), a.Bootstrapped)
}

func decodeACL(r *mpReader, a *lockstate.ACLRecord) error {
	return r.readFields(1, func(k []byte) (uint32, error) {
		if string(k) == "bootstrapped" {
			return 1 << 0, readUint(r, &a.Bootstrapped)
		}
		return 0, nil
	})
}

func appendToken(b []byte, t *lockstate.TokenRecord) []byte {
	fields := 5
	if t.Limits != nil { // format 4 only
		fields = 6
	}
	b = appendMapLen(b, fields)
	b = appendStr(appendStr(b, "id"), t.ID)
	b = appendStr(appendStr(b, "name"), t.Name)
	b = appendStr(appendStr(b, "hash"), t.Hash)
	b = appendSlice(appendStr(b, "rules"), t.Rules, appendRule)
	b = appendUint(appendStr(b, "created"), t.Created)
	if t.Limits != nil {
		b = appendTokenLimits(appendStr(b, "limits"), t.Limits)
	}
	return b
}

// appendTokenLimits writes a token's limits as msgpack does: the fields
// that are not zero (omitempty).
func appendTokenLimits(b []byte, l *lockstate.TokenLimits) []byte {
	fields := 0
	for _, v := range [...]int{l.Sessions, l.Waiters} {
		if v != 0 {
			fields++
		}
	}
	b = appendMapLen(b, fields)
	if l.Sessions != 0 {
		b = appendInt(appendStr(b, "sessions"), int64(l.Sessions))
	}
	if l.Waiters != 0 {
		b = appendInt(appendStr(b, "waiters"), int64(l.Waiters))
	}
	return b
}

// decodeToken reads a token record; with limits (format 4) it may carry
// the token's own limits as a sixth field.
func decodeToken(r *mpReader, t *lockstate.TokenRecord, limits bool) error {
	fields := 5
	if start := r.pos; limits {
		if m, err := r.mapLen(); err == nil && m == 6 {
			fields = 6
		}
		r.pos = start
	}
	return r.readFields(fields, func(k []byte) (uint32, error) {
		switch string(k) {
		case "limits":
			if fields == 6 {
				return 1 << 5, decodeTokenLimits(r, &t.Limits)
			}
		case "id":
			return 1 << 0, readString(r, &t.ID)
		case "name":
			return 1 << 1, readString(r, &t.Name)
		case "hash":
			return 1 << 2, readString(r, &t.Hash)
		case "rules":
			return 1 << 3, readList(r, &t.Rules, minRuleSize, func(rule *lockstate.Rule) error { return decodeRule(r, rule) })
		case "created":
			return 1 << 4, readUint(r, &t.Created)
		}
		return 0, nil
	})
}

var minRuleSize = len(appendRule(nil, &lockstate.Rule{}))

func appendRule(b []byte, rule *lockstate.Rule) []byte {
	b = appendMapLen(b, 2)
	b = appendStr(appendStr(b, "prefix"), rule.Prefix)
	return appendStr(appendStr(b, "access"), string(rule.Access))
}

// appendDeniedCert writes a serial of the deny list (format 5).
func appendDeniedCert(b []byte, d *lockstate.DeniedCertRecord) []byte {
	b = appendMapLen(b, 3)
	b = appendStr(appendStr(b, "serial"), d.Serial)
	b = appendStr(appendStr(b, "reason"), d.Reason)
	return appendUint(appendStr(b, "index"), d.Index)
}

func decodeDeniedCert(r *mpReader, d *lockstate.DeniedCertRecord) error {
	return r.readFields(3, func(k []byte) (uint32, error) {
		switch string(k) {
		case "serial":
			return 1 << 0, readString(r, &d.Serial)
		case "reason":
			return 1 << 1, readString(r, &d.Reason)
		case "index":
			return 1 << 2, readUint(r, &d.Index)
		}
		return 0, nil
	})
}

// loadACLRecord reads one record of formats 3 to 5's into l.
func loadACLRecord(rr *recordReader, l *lockstate.Loader, t recordType, loading *bool) error {
	var err error
	switch t {
	case recSessionExtra:
		var rec lockstate.SessionExtraRecord
		if err = rr.decode(func(r *mpReader) error { return decodeSessionExtra(r, &rec) }); err == nil {
			*loading = true
			err = l.SessionExtra(rec)
		}
	case recACL:
		var rec lockstate.ACLRecord
		if err = rr.decode(func(r *mpReader) error { return decodeACL(r, &rec) }); err == nil {
			*loading = true
			err = l.ACL(rec)
		}
	case recToken:
		var rec lockstate.TokenRecord
		if err = rr.decode(func(r *mpReader) error { return decodeToken(r, &rec, rr.tokenLimits) }); err == nil {
			*loading = true
			err = l.Token(rec)
		}
	case recDeniedCert:
		var rec lockstate.DeniedCertRecord
		if err = rr.decode(func(r *mpReader) error { return decodeDeniedCert(r, &rec) }); err == nil {
			*loading = true
			err = l.DeniedCert(rec)
		}
	}
	return err
}
