package scheduling

// improve is the deterministic improvement pass run after the queue.
func (s *solver) improve() {}
