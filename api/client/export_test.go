package client

import "time"

// PauseKeepalives is a test hook: the session sends no keepalive for d,
// and does not count that time against its TTL, so that the server
// expires it while the client still believes it alive.
func (s *Session) PauseKeepalives(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pausedUntil = time.Now().Add(d)
}
