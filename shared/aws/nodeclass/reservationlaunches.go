package nodeclass

import "time"

// reservationLaunch is one instance this process launched into a capacity
// reservation, and when.
type reservationLaunch struct {
	reservation string
	at          time.Time
}

// ReservationLaunched records that instance instanceID was launched into
// capacity reservation reservationID at the resolver's clock, so the
// available counts CapacityReservations returns from a read made before
// the launch are one lower until the next read (Karpenter tracks
// AvailableInstanceCount in memory the same way between its one-minute
// refreshes: aws: pkg/providers/capacityreservation). Recording the same
// instance again (a replayed CreateFleet answer) changes nothing; empty IDs
// are ignored. A read made after the launch already counts it in EC2's
// AvailableInstanceCount, so only launches at or after a read lower it.
// Launches by other processes and terminations are seen at the next read,
// at most ReservationRefreshInterval later.
func (r *Resolver) ReservationLaunched(reservationID, instanceID string) {
	if reservationID == "" || instanceID == "" {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.launches == nil {
		r.launches = map[string]reservationLaunch{}
	}
	if _, ok := r.launches[instanceID]; ok {
		return
	}
	for id, l := range r.launches {
		if now.Sub(l.at) > ReservationRefreshInterval {
			delete(r.launches, id) // older than any read still in use
		}
	}
	r.launches[instanceID] = reservationLaunch{reservation: reservationID, at: now}
}

// lowerByLaunches returns available (a read made at readAt) less the
// launches recorded at or after readAt, never below 0. Callers hold r.mu.
func (r *Resolver) lowerByLaunches(available map[string]int, readAt time.Time) map[string]int {
	for _, l := range r.launches {
		if n, ok := available[l.reservation]; ok && !l.at.Before(readAt) {
			available[l.reservation] = max(n-1, 0)
		}
	}
	return available
}
