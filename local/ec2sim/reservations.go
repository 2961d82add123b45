package ec2sim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Capacity reservation types and instance match criteria, as EC2 spells
// them (DescribeCapacityReservations ReservationType, InstanceMatchCriteria).
const (
	ReservationTypeDefault       = "default"
	ReservationTypeCapacityBlock = "capacity-block"
	MatchOpen                    = "open"
	MatchTargeted                = "targeted"
)

// CapacityReservation is a capacity reservation the simulator holds: an
// On-Demand Capacity Reservation (ReservationType "default") or a Capacity
// Block (ReservationType "capacity-block"), added with
// AddCapacityReservation (or POST /_sim/capacity-reservations).
type CapacityReservation struct {
	// ID is "cr-" and 17 hex digits; assigned when empty.
	ID           string `json:"id"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	// OwnerID defaults to the simulator's account.
	OwnerID string `json:"ownerId"`
	// Platform defaults to "Linux/UNIX".
	Platform string `json:"platform"`
	// TotalInstanceCount is the reservation's size (at least 1).
	TotalInstanceCount int `json:"totalInstanceCount"`
	// AvailableInstanceCount is kept by the simulator: Total less the
	// instances running in the reservation. Ignored on input.
	AvailableInstanceCount int `json:"availableInstanceCount"`
	// InstanceMatchCriteria is "open" (default: matching on-demand launches
	// without a preference of none use it) or "targeted".
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`
	// ReservationType is "default" (the default) or "capacity-block".
	ReservationType string `json:"reservationType"`
	// Interruptible marks an interruptible ODCR.
	Interruptible bool `json:"interruptible"`
	// StartDate defaults to the clock at creation; a capacity block is
	// "scheduled" before it.
	StartDate time.Time `json:"startDate"`
	// EndDate is zero for an unlimited ODCR; required for a capacity
	// block. From it on the reservation is "expired".
	EndDate time.Time         `json:"endDate"`
	Tags    map[string]string `json:"tags"`
	// State is computed: scheduled, active, expired or cancelled.
	State     string `json:"state"`
	cancelled bool
}

// stateAt is EC2's state of the reservation at now.
func (r *CapacityReservation) stateAt(now time.Time) string {
	switch {
	case r.cancelled:
		return "cancelled"
	case !r.EndDate.IsZero() && !now.Before(r.EndDate):
		return "expired"
	case now.Before(r.StartDate):
		return "scheduled"
	}
	return "active"
}

// AddCapacityReservation adds a reservation with all of its instances
// available and returns it. Errors: an unknown instance type or zone, a
// count below 1, a bad match criteria or reservation type, a capacity
// block without an end date, or a duplicate ID.
func (s *Server) AddCapacityReservation(r CapacityReservation) (CapacityReservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.types.byName[r.InstanceType] == nil {
		return CapacityReservation{}, fmt.Errorf("capacity reservation: instance type %q: unknown", r.InstanceType)
	}
	if _, ok := s.zoneByName(r.Zone); !ok {
		return CapacityReservation{}, fmt.Errorf("capacity reservation: zone %q: not in %s", r.Zone, s.region)
	}
	if r.TotalInstanceCount < 1 {
		return CapacityReservation{}, fmt.Errorf("capacity reservation: totalInstanceCount %d: must be at least 1", r.TotalInstanceCount)
	}
	r.InstanceMatchCriteria = cmp.Or(r.InstanceMatchCriteria, MatchOpen)
	if r.InstanceMatchCriteria != MatchOpen && r.InstanceMatchCriteria != MatchTargeted {
		return CapacityReservation{}, fmt.Errorf("capacity reservation: instanceMatchCriteria %q: must be open or targeted", r.InstanceMatchCriteria)
	}
	r.ReservationType = cmp.Or(r.ReservationType, ReservationTypeDefault)
	switch r.ReservationType {
	case ReservationTypeDefault:
	case ReservationTypeCapacityBlock:
		if r.EndDate.IsZero() {
			return CapacityReservation{}, fmt.Errorf("capacity reservation: a capacity block needs an endDate")
		}
		// Capacity blocks are targeted only (EC2 User Guide, Capacity
		// Blocks for ML).
		r.InstanceMatchCriteria = MatchTargeted
	default:
		return CapacityReservation{}, fmt.Errorf("capacity reservation: reservationType %q: must be default or capacity-block", r.ReservationType)
	}
	if r.ID == "" {
		r.ID = s.newID("cr")
	}
	if s.reservationByID(r.ID) != nil {
		return CapacityReservation{}, fmt.Errorf("capacity reservation %s: already exists", r.ID)
	}
	r.OwnerID = cmp.Or(r.OwnerID, s.accountID)
	r.Platform = cmp.Or(r.Platform, "Linux/UNIX")
	if r.StartDate.IsZero() {
		r.StartDate = now.UTC().Truncate(time.Second)
	}
	r.AvailableInstanceCount = r.TotalInstanceCount
	r.Tags = maps.Clone(r.Tags)
	r.cancelled = false
	s.reservations = append(s.reservations, &r)
	out := r
	out.State = r.stateAt(now)
	return out, nil
}

// CancelCapacityReservation cancels a reservation, as
// CancelCapacityReservation does: its state becomes cancelled and nothing
// launches into it any more.
func (s *Server) CancelCapacityReservation(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reservationByID(id)
	if r == nil {
		return fmt.Errorf("capacity reservation %s: not found", id)
	}
	r.cancelled = true
	return nil
}

// CapacityReservations returns every reservation, in creation order, with
// its state and available count now.
func (s *Server) CapacityReservations() []CapacityReservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	s.advance(now)
	out := make([]CapacityReservation, len(s.reservations))
	for i, r := range s.reservations {
		out[i] = *r
		out[i].Tags = maps.Clone(r.Tags)
		out[i].State = r.stateAt(now)
	}
	return out
}

func (s *Server) reservationByID(id string) *CapacityReservation {
	for _, r := range s.reservations {
		if r.ID == id {
			return r
		}
	}
	return nil
}

type capacityReservationXML struct {
	CapacityReservationID  string   `xml:"capacityReservationId"`
	OwnerID                string   `xml:"ownerId"`
	CapacityReservationArn string   `xml:"capacityReservationArn"`
	AvailabilityZoneID     string   `xml:"availabilityZoneId"`
	InstanceType           string   `xml:"instanceType"`
	InstancePlatform       string   `xml:"instancePlatform"`
	AvailabilityZone       string   `xml:"availabilityZone"`
	Tenancy                string   `xml:"tenancy"`
	TotalInstanceCount     int      `xml:"totalInstanceCount"`
	AvailableInstanceCount int      `xml:"availableInstanceCount"`
	EbsOptimized           bool     `xml:"ebsOptimized"`
	EphemeralStorage       bool     `xml:"ephemeralStorage"`
	State                  string   `xml:"state"`
	StartDate              string   `xml:"startDate"`
	EndDate                string   `xml:"endDate,omitempty"`
	EndDateType            string   `xml:"endDateType"`
	InstanceMatchCriteria  string   `xml:"instanceMatchCriteria"`
	CreateDate             string   `xml:"createDate"`
	ReservationType        string   `xml:"reservationType"`
	Interruptible          bool     `xml:"interruptible"`
	TagSet                 []tagXML `xml:"tagSet>item,omitempty"`
}

type describeCapacityReservationsResponse struct {
	respHeader
	CapacityReservations []capacityReservationXML `xml:"capacityReservationSet>item"`
	NextToken            string                   `xml:"nextToken,omitempty"`
}

// describeCapacityReservations follows EC2 DescribeCapacityReservations:
// CapacityReservationId.N (an unknown ID fails the call with
// InvalidCapacityReservationId.NotFound), the filters instance-type,
// owner-id, availability-zone, instance-platform, tenancy, state,
// start-date, end-date, end-date-type, instance-match-criteria,
// reservation-type and tag:<key>/tag-key/tag-value, and paging with
// MaxResults 1 to 1000 (default everything) and NextToken.
func (s *Server) describeCapacityReservations(q *qnode, now time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"instance-type", "owner-id", "availability-zone", "instance-platform", "tenancy",
		"state", "start-date", "end-date", "end-date-type", "instance-match-criteria", "reservation-type"}, true)
	if err != nil {
		return nil, err
	}
	ids := q.strs("CapacityReservationId")
	for _, id := range ids {
		if s.reservationByID(id) == nil {
			return nil, errorf("InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
		}
	}
	var out []capacityReservationXML
	for _, r := range s.reservations {
		if len(ids) > 0 && !slices.Contains(ids, r.ID) {
			continue
		}
		x := s.reservationXML(r, now)
		field := func(name string) []string {
			switch name {
			case "instance-type":
				return []string{x.InstanceType}
			case "owner-id":
				return []string{x.OwnerID}
			case "availability-zone":
				return []string{x.AvailabilityZone}
			case "instance-platform":
				return []string{x.InstancePlatform}
			case "tenancy":
				return []string{x.Tenancy}
			case "state":
				return []string{x.State}
			case "start-date":
				return []string{x.StartDate}
			case "end-date":
				return []string{x.EndDate}
			case "end-date-type":
				return []string{x.EndDateType}
			case "instance-match-criteria":
				return []string{x.InstanceMatchCriteria}
			case "reservation-type":
				return []string{x.ReservationType}
			}
			return nil
		}
		if !matches(filters, r.Tags, field) {
			continue
		}
		out = append(out, x)
	}
	p, err := paginate(q, "DescribeCapacityReservations", len(out), 1, 1000, 0)
	if err != nil {
		return nil, err
	}
	return &describeCapacityReservationsResponse{CapacityReservations: out[p.start:p.end], NextToken: p.next}, nil
}

func (s *Server) reservationXML(r *CapacityReservation, now time.Time) capacityReservationXML {
	z, _ := s.zoneByName(r.Zone)
	x := capacityReservationXML{
		CapacityReservationID:  r.ID,
		OwnerID:                r.OwnerID,
		CapacityReservationArn: fmt.Sprintf("arn:aws:ec2:%s:%s:capacity-reservation/%s", s.region, r.OwnerID, r.ID),
		AvailabilityZoneID:     z.id, InstanceType: r.InstanceType, InstancePlatform: r.Platform, AvailabilityZone: r.Zone,
		Tenancy: "default", TotalInstanceCount: r.TotalInstanceCount, AvailableInstanceCount: r.AvailableInstanceCount,
		EbsOptimized: true, State: r.stateAt(now), StartDate: timestamp(r.StartDate), EndDateType: "unlimited",
		InstanceMatchCriteria: r.InstanceMatchCriteria, CreateDate: timestamp(r.StartDate), ReservationType: r.ReservationType,
		Interruptible: r.Interruptible, TagSet: tagSet(r.Tags),
	}
	if !r.EndDate.IsZero() {
		x.EndDate, x.EndDateType = timestamp(r.EndDate), "limited"
	}
	return x
}

// Capacity types CreateFleet launches into reservations with
// (TargetCapacitySpecification.DefaultTargetCapacityType).
const (
	capacityBlock    = "capacity-block"
	capacityReserved = "reserved-capacity"
)

// The launch template market types (InstanceMarketOptions.MarketType,
// EC2 API LaunchTemplateInstanceMarketOptionsRequest).
const (
	marketSpot          = "spot"
	marketCapacityBlock = "capacity-block"
	marketInterruptible = "interruptible-capacity-reservation"
)

// errMarketTypeMsg is EC2's answer to a launch into a reservation whose market
// type the launch template does not name (a capacity block without
// MarketType capacity-block, as reported by users of RunInstances):
// InvalidParameterValue.
const errMarketTypeMsg = "The market type (purchasing) option is not valid. Choose a different market type and try again."

// marketFor is the market type a launch into r needs: capacity-block for a
// capacity block, interruptible-capacity-reservation for an interruptible
// reservation, none for an On-Demand Capacity Reservation.
func marketFor(r *CapacityReservation) string {
	switch {
	case r.ReservationType == ReservationTypeCapacityBlock:
		return marketCapacityBlock
	case r.Interruptible:
		return marketInterruptible
	}
	return ""
}

// marketOf is the pricing and capacity pool a fleet capacity type draws
// from: reservations are on-demand capacity.
func marketOf(capacityType string) string {
	if capacityType == capacityBlock || capacityType == capacityReserved {
		return capacityOnDemand
	}
	return capacityType
}

// reservationFor decides which reservation a launch of one instance in pool
// o as capacityType uses, following the launch template's
// CapacityReservationSpecification:
//   - a CapacityReservationTarget: that reservation, which must exist
//     (InvalidCapacityReservationId.NotFound), be active, match the pool's
//     instance type and zone (InvalidParameterCombination) and have an
//     instance free (ReservationCapacityExceeded); Spot cannot target one;
//     a capacity-block launch needs a capacity block and a capacity block
//     takes only capacity-block launches; the template's market type must
//     be the reservation's (marketFor: capacity-block for a capacity block,
//     interruptible-capacity-reservation for an interruptible reservation,
//     none for an ODCR), else InvalidParameterValue;
//   - no target with capacity-block or reserved-capacity: MissingParameter;
//   - preference capacity-reservations-only without a target: an active
//     open reservation matching the pool with an instance free, else
//     InsufficientInstanceCapacity;
//   - preference open (or none given, EC2's default) on-demand: a matching
//     active open reservation with an instance free when there is one,
//     else no reservation; preference none: no reservation.
func (s *Server) reservationFor(o *override, capacityType string, now time.Time) (r *CapacityReservation, code, msg string) {
	pref, target := o.lt.data.crPreference, o.lt.data.crTarget
	if target != "" {
		r = s.reservationByID(target)
		switch {
		case r == nil:
			return nil, "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation ID '%s' does not exist", target)
		case capacityType == capacitySpot:
			return nil, "InvalidParameterCombination", "Spot Instances cannot be launched into a Capacity Reservation."
		case r.stateAt(now) != "active":
			return nil, "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation '%s' is %s.", target, r.stateAt(now))
		case r.InstanceType != o.instanceType || r.Zone != o.zone.name:
			return nil, "InvalidParameterCombination", fmt.Sprintf("The instance type (%s) and Availability Zone (%s) do not match Capacity Reservation %s (%s in %s).",
				o.instanceType, o.zone.name, r.ID, r.InstanceType, r.Zone)
		case (capacityType == capacityBlock) != (r.ReservationType == ReservationTypeCapacityBlock):
			return nil, "InvalidParameterCombination", fmt.Sprintf("Capacity Reservation %s of type %s cannot take a %s launch.", r.ID, r.ReservationType, capacityType)
		case o.lt.data.marketType != marketFor(r):
			return nil, "InvalidParameterValue", errMarketTypeMsg
		case r.AvailableInstanceCount <= 0:
			return nil, "ReservationCapacityExceeded", fmt.Sprintf("The requested number of instances exceeds the capacity available in the targeted Capacity Reservation %s.", r.ID)
		}
		return r, "", ""
	}
	if capacityType == capacityBlock || capacityType == capacityReserved {
		return nil, "MissingParameter", fmt.Sprintf("A %s launch needs a CapacityReservationTarget in its launch template.", capacityType)
	}
	if capacityType != capacityOnDemand || pref == "none" {
		return nil, "", ""
	}
	for _, cand := range s.reservations {
		if cand.InstanceMatchCriteria == MatchOpen && cand.stateAt(now) == "active" && cand.InstanceType == o.instanceType &&
			cand.Zone == o.zone.name && cand.AvailableInstanceCount > 0 {
			return cand, "", ""
		}
	}
	if pref == "capacity-reservations-only" {
		return nil, "InsufficientInstanceCapacity", fmt.Sprintf("There is no open Capacity Reservation with %s capacity available in %s.", o.instanceType, o.zone.name)
	}
	return nil, "", ""
}

// releaseReservation returns a terminated instance's slot to its
// reservation.
func (s *Server) releaseReservation(in *instance) {
	if in.capacityReservationID == "" {
		return
	}
	if r := s.reservationByID(in.capacityReservationID); r != nil && r.AvailableInstanceCount < r.TotalInstanceCount {
		r.AvailableInstanceCount++
	}
}
