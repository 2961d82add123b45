package fleet

import (
	"errors"

	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

// MaxInstanceTypes is the most instance types one CreateFleet call lists
// (launch.MaxInstanceTypes).
const MaxInstanceTypes = launch.MaxInstanceTypes

// plan is a launch.Plan with the subnet chosen per zone.
type plan struct {
	launch.Plan
	// subnets maps a zone to the subnet used there.
	subnets map[string]launch.Subnet
}

// newPlan asks the launch model what req.NodeClaim may launch as, over the
// zones that have a usable subnet.
func newPlan(req *Request) (plan, error) {
	subnets := launch.SubnetPerZone(req.Subnets)
	zones := make(map[string]bool, len(subnets))
	for z := range subnets {
		zones[z] = true
	}
	p, err := launch.New(launch.Request{
		Requirements:  requirements.FromNodeSelector(req.NodeClaim.Spec.Requirements),
		Requests:      req.NodeClaim.Spec.Resources.Requests,
		InstanceTypes: req.InstanceTypes,
		Zones:         zones,
	})
	if errors.Is(err, launch.ErrNoCompatibleOffering) {
		return plan{}, &launch.InsufficientCapacityError{Reason: err.Error(), Err: err}
	}
	if err != nil {
		return plan{}, err
	}
	return plan{Plan: p, subnets: subnets}, nil
}

// types are the candidates with an offering of the plan's capacity type,
// cheapest first: the instance types the launch requests.
func (p *plan) types() []*catalog.InstanceType {
	byName := make(map[string]*catalog.InstanceType, len(p.Candidates))
	for _, c := range p.Candidates {
		byName[c.Type.Name] = c.Type
	}
	var out []*catalog.InstanceType
	seen := map[string]bool{}
	for _, o := range p.Offerings {
		if !seen[o.InstanceType] {
			seen[o.InstanceType] = true
			out = append(out, byName[o.InstanceType])
		}
	}
	return out
}
