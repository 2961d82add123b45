package scheduling

import (
	"fmt"
	"strings"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// explain builds the reason a pod stayed unplaced, from the final state: a
// custom label no NodePool defines, or, per NodePool in order, why that pool
// cannot host it. Several pools' reasons are joined in pool order.
func (s *solver) explain(pi *podInfo) string {
	e := pi.eff
	podReqs := s.reqs.get(e.reqID)
	for _, k := range podReqs.Keys() {
		if v1.WellKnownLabels[k] || negative(podReqs[k]) {
			continue
		}
		defined := false
		for _, p := range s.pools {
			if s.reqs.get(p.reqID).Has(k) {
				defined = true
				break
			}
		}
		if !defined {
			return fmt.Sprintf("label %q is defined by no NodePool: a pod may require a custom label only when a NodePool sets it in its template labels or requirements", k)
		}
	}
	if len(s.pools) == 0 {
		return "no NodePool exists"
	}
	parts := make([]string, 0, len(s.pools))
	for _, p := range s.pools {
		_, why := s.evalNew(pi, p, true)
		if why == "" {
			why = "could host the pod alone, but the scheduling loop found no placement for it"
		}
		parts = append(parts, fmt.Sprintf("NodePool %q: %s", p.name, why))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "no NodePool can host the pod: " + strings.Join(parts, "; ")
}

// explainFit says why no candidate of tl takes the pod: a NodePool limit,
// a single resource larger than any compatible type offers, or the
// combination.
func (s *solver) explainFit(pi *podInfo, p *pool, tl *typeList, limitCap *vec) string {
	n := s.res.n()
	if fit := s.fitFrom(tl, 0, &pi.req, false, limitCap); fit >= 0 {
		// Resources fit some type; the limits exclude every one that fits.
		for i := 0; i < n; i++ {
			if !p.limited[i] {
				continue
			}
			smallest := int64(-1)
			for _, t := range tl.types {
				if leq(&pi.req, &t.alloc, n) && (smallest < 0 || t.capacity[i] < smallest) {
					smallest = t.capacity[i]
				}
			}
			if smallest > limitCap[i] {
				return fmt.Sprintf("limit %s %s reached (%s in use)", s.res.names[i], s.res.format(i, p.limit[i]), s.res.format(i, p.usage[i]))
			}
		}
		return "the NodePool's limits leave no instance type that fits the pod"
	}
	for i := 0; i < n; i++ {
		if pi.req[i] == 0 {
			continue
		}
		var largest *ptype
		for _, t := range tl.types {
			if largest == nil || t.alloc[i] > largest.alloc[i] {
				largest = t
			}
		}
		if largest != nil && largest.alloc[i] < pi.req[i] {
			what := "allocatable " + string(s.res.names[i])
			if largest.ds[i] > 0 {
				what += fmt.Sprintf(" after %s of daemonset overhead", s.res.format(i, largest.ds[i]))
			}
			have := largest.alloc[i]
			if have < 0 {
				have = 0
			}
			if i == resPods {
				return fmt.Sprintf("largest compatible instance type %s has room for %s pods, pod needs 1", largest.name, s.res.format(i, have))
			}
			msg := fmt.Sprintf("largest compatible instance type %s has %s %s, pod requests %s", largest.name, s.res.format(i, have), what, s.res.format(i, pi.req[i]))
			if i == resEphemeral {
				msg += " (an EC2NodeClass's blockDeviceMappings set the root volume size, which is a node's ephemeral storage)"
			}
			return msg
		}
	}
	var reqs []string
	for i := 0; i < n; i++ {
		if pi.req[i] > 0 && i != resPods {
			reqs = append(reqs, fmt.Sprintf("%s %s", s.res.names[i], s.res.format(i, pi.req[i])))
		}
	}
	return fmt.Sprintf("no compatible instance type has room for all of the pod's requests at once (%s, plus daemonset overhead)", strings.Join(reqs, ", "))
}
