package launch

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/requirements"
)

// ErrNoCompatibleOffering means no instance type passed the filters.
var ErrNoCompatibleOffering = errors.New("no compatible offering")

// Offering is one (instance type, zone, capacity type) a launch may get.
type Offering struct {
	InstanceType string
	Zone         string
	CapacityType string
	// ReservationID is set for reserved offerings only.
	ReservationID string
	// ReservationType is the reservation's type (v1.ReservationTypeDefault
	// or v1.ReservationTypeCapacityBlock), reserved offerings only.
	ReservationType string
	// Interruptible marks an offering of an interruptible capacity
	// reservation (reserved offerings only).
	Interruptible bool
	// Price is USD per hour.
	Price float64
}

// Plan is what a NodeClaim may launch as.
type Plan struct {
	// Candidates are the instance types left by every filter, cheapest
	// first (by their cheapest allowed offering, then name), with their
	// allowed available offerings of every capacity type; at most
	// MaxInstanceTypes. They are the NodeClaim's instance types.
	Candidates []Candidate
	// CapacityType is the one the launch requests: reserved if a candidate
	// has a reserved offering, else spot if one has a spot offering, else
	// on-demand (aws: instance.go getCapacityType; karpenter-spec §4 step
	// 4).
	CapacityType string
	// Offerings are the candidates' offerings of CapacityType (for reserved,
	// the cheapest per type and zone, ties by reservation ID), cheapest
	// first, ties in candidate order, then by zone. The first is the
	// expected one.
	Offerings []Offering
	// Rejected lists, per filter in pipeline order, the types it removed.
	Rejected []Rejection
	// Tenancy is the launch's tenancy (Tenancy of the requirements):
	// TenancyDefault or TenancyDedicated. New sets it; Choose leaves it "".
	Tenancy string
}

// The instance tenancies a launch may request (the values of
// karpenter.k8s.aws/instance-tenancy; EC2 Placement.Tenancy).
const (
	TenancyDefault   = "default"
	TenancyDedicated = "dedicated"
)

// Tenancy is the tenancy a NodeClaim with these requirements launches
// with: TenancyDedicated when its karpenter.k8s.aws/instance-tenancy
// requirement admits dedicated but not default, else TenancyDefault
// (karpenter-spec section 1.4 and section 4 step 4: default unless only
// dedicated is allowed).
func Tenancy(reqs requirements.Requirements) string {
	if r := reqs.Get(v1.LabelInstanceTenancy); r.Has(TenancyDedicated) && !r.Has(TenancyDefault) {
		return TenancyDedicated
	}
	return TenancyDefault
}

// Expected is the offering the launch is expected to get: the first of
// Offerings (false when there is none).
func (p *Plan) Expected() (Offering, bool) {
	if len(p.Offerings) == 0 {
		return Offering{}, false
	}
	return p.Offerings[0], true
}

// InstanceTypes are the candidates' names, in order.
func (p *Plan) InstanceTypes() []string {
	out := make([]string, len(p.Candidates))
	for i, c := range p.Candidates {
		out[i] = c.Type.Name
	}
	return out
}

// Request is what New decides over.
type Request struct {
	// Requirements are the NodeClaim's requirements (its
	// spec.requirements, including instance-type In [...]).
	Requirements requirements.Requirements
	// Requests are the NodeClaim's resource requests (daemonset overhead
	// included); a type's allocatable must hold them.
	Requests corev1.ResourceList
	// InstanceTypes are the node class's instance types with their
	// offerings, unavailable ones marked.
	InstanceTypes []*catalog.InstanceType
	// Zones, when not nil, are the zones a launch can use (those with a
	// usable subnet); offerings elsewhere are left out.
	Zones map[string]bool
	// MaxInstanceTypes caps the candidates; 0 means MaxInstanceTypes.
	MaxInstanceTypes int
}

// New runs the whole pipeline for a NodeClaim: compatible, fits, offering,
// then Narrow and Choose. Errors: ErrNoCompatibleOffering (wrapped, the
// message saying how many types were considered) when no type is left; an
// error naming the key when truncation cannot keep a minValues that the
// filtered types met.
func New(req Request) (Plan, error) {
	reqVec, vectorOK := catalog.NewVector(req.Requests)
	filter := NewOfferFilter(req.Requirements)
	var rej []Rejection
	var incompatible, tooSmall, noOffer []string
	keep := func(o *catalog.Offering) bool { return o.Available && (req.Zones == nil || req.Zones[o.Zone]) }
	cands := make([]Candidate, 0, len(req.InstanceTypes))
	for i, it := range req.InstanceTypes {
		if it == nil {
			continue
		}
		if !AdmitsType(req.Requirements, it) {
			incompatible = append(incompatible, it.Name)
			continue
		}
		if vectorOK && !reqVec.Fits(it.AllocatableVector()) || !vectorOK && !fits(req.Requests, it.Allocatable()) {
			tooSmall = append(tooSmall, it.Name)
			continue
		}
		offers := filter.Allowed(it.Offerings, keep)
		if len(offers) == 0 {
			noOffer = append(noOffer, it.Name)
			continue
		}
		cands = append(cands, Candidate{Type: it, Offerings: offers, Ref: i})
	}
	for _, r := range []Rejection{{FilterCompatible, incompatible}, {FilterFits, tooSmall}, {FilterOffering, noOffer}} {
		if len(r.InstanceTypes) > 0 {
			rej = append(rej, r)
		}
	}
	if len(cands) == 0 {
		return Plan{Rejected: rej}, fmt.Errorf("no instance type of %d satisfies the nodeclaim's requirements and requests with an available offering in a zone with a subnet: %w",
			len(req.InstanceTypes), ErrNoCompatibleOffering)
	}
	max := req.MaxInstanceTypes
	if max <= 0 {
		max = MaxInstanceTypes
	}
	all := len(cands)
	metBefore, _, _ := MinValuesShortfall(req.Requirements, cands)
	cands = Narrow(req.Requirements, cands, max, &rej)
	if all > max && metBefore == "" {
		if key, _, _ := MinValuesShortfall(req.Requirements, cands); key != "" {
			return Plan{Rejected: rej}, fmt.Errorf("instance types: minValues of %q cannot be met by %d instance types", key, max)
		}
	}
	p := Choose(cands)
	p.Rejected = rej
	p.Tenancy = Tenancy(req.Requirements)
	return p, nil
}

// Choose picks the capacity type of cands (the output of Narrow) and orders
// their offerings of it; the first is the expected offering.
func Choose(cands []Candidate) Plan {
	return ChooseInto(nil, cands)
}

// ChooseInto is Choose with the plan's Offerings built in buf's storage
// (grown when too small), so that a caller that only reads the plan before
// its next call can reuse one buffer: the solver does, once per claim.
func ChooseInto(buf []Offering, cands []Candidate) Plan {
	p := Plan{Candidates: cands, CapacityType: capacityType(cands)}
	n := 0
	for _, c := range cands {
		for _, o := range c.Offerings {
			if o.CapacityType == p.CapacityType {
				n++
			}
		}
	}
	if cap(buf) < n {
		buf = make([]Offering, 0, n)
	}
	p.Offerings = buf[:0]
	for _, c := range cands {
		start := len(p.Offerings)
		for _, o := range c.Offerings {
			if o.CapacityType != p.CapacityType {
				continue
			}
			p.Offerings = append(p.Offerings, Offering{InstanceType: c.Type.Name, Zone: o.Zone, CapacityType: o.CapacityType, ReservationID: o.ReservationID, ReservationType: o.ReservationType, Interruptible: o.Interruptible, Price: o.Price})
		}
		if p.CapacityType == v1.CapacityTypeReserved {
			p.Offerings = append(p.Offerings[:start], onePerZone(p.Offerings[start:])...)
		}
		// Within a type: cheapest first, then by zone.
		slices.SortStableFunc(p.Offerings[start:], func(a, b Offering) int {
			return cmp.Or(cmp.Compare(a.Price, b.Price), strings.Compare(a.Zone, b.Zone))
		})
	}
	// Across types: cheapest first; ties keep candidate order.
	slices.SortStableFunc(p.Offerings, func(a, b Offering) int { return cmp.Compare(a.Price, b.Price) })
	if p.CapacityType == v1.CapacityTypeReserved && len(p.Offerings) > 0 {
		// One launch targets one kind of reservation (karpenter-spec §4
		// step 2, capacity-reservation-type filter: default, capacity-block
		// or interruptible): the cheapest offering's kind; no two kinds can
		// share a CreateFleet (DefaultTargetCapacityType and the launch
		// templates' market type differ).
		keep := p.Offerings[0]
		p.Offerings = slices.DeleteFunc(p.Offerings, func(o Offering) bool {
			return o.ReservationType != keep.ReservationType || o.Interruptible != keep.Interruptible
		})
	}
	return p
}

// capacityType is the first of reserved, spot and on-demand that some
// candidate offers.
func capacityType(cands []Candidate) string {
	for _, ct := range []string{v1.CapacityTypeReserved, v1.CapacityTypeSpot} {
		for _, c := range cands {
			for _, o := range c.Offerings {
				if o.CapacityType == ct {
					return ct
				}
			}
		}
	}
	return v1.CapacityTypeOnDemand
}

// onePerZone keeps the cheapest reserved offering per zone, ties by
// reservation ID (Karpenter keeps the one with the most free capacity,
// which the catalog does not model), in zone order.
func onePerZone(offers []Offering) []Offering {
	best := map[string]Offering{}
	for _, o := range offers {
		cur, ok := best[o.Zone]
		if !ok || o.Price < cur.Price || (o.Price == cur.Price && o.ReservationID < cur.ReservationID) {
			best[o.Zone] = o
		}
	}
	out := offers[:0:0]
	for _, o := range best {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b Offering) int { return strings.Compare(a.Zone, b.Zone) })
	return out
}
