package pgstate

// Crash stops s as a kill of its process would: its leases are neither
// returned nor used again, the changes queued and not committed are lost,
// and the pool is closed. For the backend conformance suite (ledgertest).
func Crash(s *Store) {
	s.lmu.Lock()
	s.leaseOff = true
	clear(s.grants)
	s.lmu.Unlock()
	s.qmu.Lock()
	lost := s.queue
	s.queue = nil
	s.closed = true
	s.qmu.Unlock()
	for _, o := range lost {
		if o.done != nil {
			close(o.done)
		}
	}
	s.signal()
	<-s.stopped
	s.pool.Close()
}
