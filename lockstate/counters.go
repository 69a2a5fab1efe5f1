package lockstate

// Counters count what this table has applied since it was created or
// loaded, for metrics. They are not part of the table's state: not
// exported, not digested, and a table loaded from a snapshot starts them
// at 0 (as Prometheus expects of a counter after a restart).
type Counters struct {
	Grants             uint64 // locks granted (one per granted lock of a request)
	Handoffs           uint64 // of those, to a request that had waited in a queue
	Timeouts           uint64 // requests whose wait ran out (wait 0 included)
	DeadlockAborts     uint64 // requests failed as deadlock victims
	DeadlockSurrenders uint64 // deadlocks broken by a victim surrendering its holds
	Cancels            uint64 // pending requests cancelled (by a client or a session's end)
	SessionExpiries    uint64 // sessions expired (keepalives stopped)
	ExpiryEntries      uint64 // entries that expired sessions: SessionExpiries/ExpiryEntries is a mass expiry's batching
	HoldExpiries       uint64 // holds ended by hold_ttl or their session's expiry
	Revokes            uint64 // holds revoked by an operator
	Surrenders         uint64 // holds surrendered (by a client or a deadlock victim)
}

// Counters returns the table's counters.
func (t *Table) Counters() Counters { return t.counters }

// count tallies an event.
func (c *Counters) count(kind EventKind) {
	switch kind {
	case EvGranted:
		c.Grants++
	case EvTimeout:
		c.Timeouts++
	case EvDeadlock:
		c.DeadlockAborts++
	case EvCancelled:
		c.Cancels++
	case EvSessionExpired:
		c.SessionExpiries++
	case EvExpired:
		c.HoldExpiries++
	case EvRevoked:
		c.Revokes++
	case EvSurrendered:
		c.Surrenders++
	}
}
