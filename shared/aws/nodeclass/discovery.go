package nodeclass

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/launch"
)

// tagFilters turns selector tags into EC2 filters: tag:<key>=<value>, or
// tag-key=<key> for the value "*" (karpenter-spec §4.1). Keys are sorted.
func tagFilters(tags map[string]string) []ec2types.Filter {
	var out []ec2types.Filter
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if tags[k] == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
		}
	}
	return out
}

// Subnets resolves spec.subnetSelectorTerms (karpenter-spec §1.3, §4.1):
// one DescribeSubnets call per tag term, one for all id terms together
// (filter subnet-id), no VPC or state filter; results are unioned,
// de-duplicated and sorted by free addresses, most first, then by ID.
// Errors: a failed call (wrapped), or ErrSubnetsNotFound when nothing
// matches.
func (r *Resolver) Subnets(ctx context.Context, nc *v1.EC2NodeClass) ([]launch.Subnet, error) {
	var queries [][]ec2types.Filter
	var ids []string
	for _, term := range nc.Spec.SubnetSelectorTerms {
		switch {
		case term.ID != "":
			ids = append(ids, term.ID)
		case len(term.Tags) > 0:
			queries = append(queries, tagFilters(term.Tags))
		}
	}
	if len(ids) > 0 {
		queries = append(queries, []ec2types.Filter{{Name: aws.String("subnet-id"), Values: ids}})
	}
	found := map[string]launch.Subnet{}
	for _, filters := range queries {
		in := &ec2.DescribeSubnetsInput{Filters: filters}
		for {
			out, err := r.ec2.DescribeSubnets(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("node class %s: describe subnets: %w", nc.Name, err)
			}
			for _, s := range out.Subnets {
				found[aws.ToString(s.SubnetId)] = launch.Subnet{
					ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId),
					AvailableIPs: int64(aws.ToInt32(s.AvailableIpAddressCount)),
				}
			}
			if aws.ToString(out.NextToken) == "" {
				break
			}
			in.NextToken = out.NextToken
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("node class %s: %w for spec.subnetSelectorTerms", nc.Name, ErrSubnetsNotFound)
	}
	out := slices.Collect(maps.Values(found))
	slices.SortFunc(out, func(a, b launch.Subnet) int {
		return cmp.Or(cmp.Compare(b.AvailableIPs, a.AvailableIPs), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// SecurityGroups resolves spec.securityGroupSelectorTerms (karpenter-spec
// §1.3, §4.1): one DescribeSecurityGroups call per tag or name term (name
// is the group name, filter group-name, ANDed with the term's tags), one
// for all id terms together (filter group-id); results are unioned,
// de-duplicated and sorted by ID. Errors: a failed call (wrapped), or
// ErrSecurityGroupsNotFound when nothing matches.
func (r *Resolver) SecurityGroups(ctx context.Context, nc *v1.EC2NodeClass) ([]v1.SecurityGroup, error) {
	var queries [][]ec2types.Filter
	var ids []string
	for _, term := range nc.Spec.SecurityGroupSelectorTerms {
		switch {
		case term.ID != "":
			ids = append(ids, term.ID)
		case term.Name != "" || len(term.Tags) > 0:
			filters := tagFilters(term.Tags)
			if term.Name != "" {
				filters = append(filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{term.Name}})
			}
			queries = append(queries, filters)
		}
	}
	if len(ids) > 0 {
		queries = append(queries, []ec2types.Filter{{Name: aws.String("group-id"), Values: ids}})
	}
	found := map[string]v1.SecurityGroup{}
	for _, filters := range queries {
		in := &ec2.DescribeSecurityGroupsInput{Filters: filters}
		for {
			out, err := r.ec2.DescribeSecurityGroups(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("node class %s: describe security groups: %w", nc.Name, err)
			}
			for _, g := range out.SecurityGroups {
				found[aws.ToString(g.GroupId)] = v1.SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)}
			}
			if aws.ToString(out.NextToken) == "" {
				break
			}
			in.NextToken = out.NextToken
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("node class %s: %w for spec.securityGroupSelectorTerms", nc.Name, ErrSecurityGroupsNotFound)
	}
	out := slices.Collect(maps.Values(found))
	slices.SortFunc(out, func(a, b v1.SecurityGroup) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// CapacityReservations resolves spec.capacityReservationSelectorTerms
// (karpenter-spec §2 EC2NodeClass, §4.1 "Discovery query shapes", aws:
// pkg/providers/capacityreservation/provider.go): one
// DescribeCapacityReservations call for all id terms together
// (CapacityReservationIds), one per other term with its tags (tag:<k>=<v>,
// tag-key=<k> for "*"), owner-id and instance-match-criteria filters
// ANDed; every call filters state=active. Results are unioned,
// de-duplicated and sorted by ID, each with State from
// v1.CapacityReservation.StateAt at the resolver's clock; available maps
// each reservation ID to its AvailableInstanceCount. No terms: no call,
// nothing found. Errors: a failed call (wrapped).
//
// Answers are kept per set of selector terms for
// ReservationRefreshInterval on the resolver's clock (Karpenter refreshes
// reservations every minute): a resolution within a minute of the last
// read reuses it, one later reads EC2 again, so available counts are at
// most a minute old; a kept answer is lowered by this process's own
// launches since it was read (ReservationLaunched). States are recomputed
// at each call's clock. Failed reads are not kept.
func (r *Resolver) CapacityReservations(ctx context.Context, nc *v1.EC2NodeClass) (found []v1.CapacityReservation, available map[string]int, err error) {
	if len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
		return nil, map[string]int{}, nil
	}
	key, err := json.Marshal(nc.Spec.CapacityReservationSelectorTerms)
	if err != nil {
		return nil, nil, fmt.Errorf("node class %s: capacity reservation terms: %w", nc.Name, err)
	}
	now := r.now()
	r.mu.Lock()
	e, ok := r.reservations[string(key)]
	r.mu.Unlock()
	if !ok || now.Sub(e.at) >= ReservationRefreshInterval || now.Before(e.at) {
		e.found, e.available, err = r.describeReservations(ctx, nc)
		if err != nil {
			return nil, nil, err
		}
		e.at = now
		r.mu.Lock()
		if r.reservations == nil {
			r.reservations = map[string]reservationRead{}
		}
		r.reservations[string(key)] = e
		r.mu.Unlock()
	}
	found = make([]v1.CapacityReservation, len(e.found))
	for i, res := range e.found {
		res.State = res.StateAt(now)
		found[i] = res
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return found, r.lowerByLaunches(maps.Clone(e.available), e.at), nil
}

// ReservationRefreshInterval is how long CapacityReservations keeps an
// answer: Karpenter's 1-minute capacity-reservation refresh
// (karpenter-spec section 4 and 7: capacity reservations 1 min).
const ReservationRefreshInterval = time.Minute

// reservationRead is one DescribeCapacityReservations answer and when it
// was read.
type reservationRead struct {
	at        time.Time
	found     []v1.CapacityReservation
	available map[string]int
}

// describeReservations queries EC2 for CapacityReservations.
func (r *Resolver) describeReservations(ctx context.Context, nc *v1.EC2NodeClass) (found []v1.CapacityReservation, available map[string]int, err error) {
	var queries []*ec2.DescribeCapacityReservationsInput
	var ids []string
	active := ec2types.Filter{Name: aws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}
	for _, term := range nc.Spec.CapacityReservationSelectorTerms {
		if term.ID != "" {
			ids = append(ids, term.ID)
			continue
		}
		filters := tagFilters(term.Tags)
		if term.OwnerID != "" {
			filters = append(filters, ec2types.Filter{Name: aws.String("owner-id"), Values: []string{term.OwnerID}})
		}
		if term.InstanceMatchCriteria != "" {
			filters = append(filters, ec2types.Filter{Name: aws.String("instance-match-criteria"), Values: []string{term.InstanceMatchCriteria}})
		}
		queries = append(queries, &ec2.DescribeCapacityReservationsInput{Filters: append(filters, active)})
	}
	if len(ids) > 0 {
		queries = append(queries, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: ids, Filters: []ec2types.Filter{active}})
	}
	byID := map[string]v1.CapacityReservation{}
	available = map[string]int{}
	for _, in := range queries {
		for {
			out, err := r.ec2.DescribeCapacityReservations(ctx, in)
			if err != nil {
				return nil, nil, fmt.Errorf("node class %s: describe capacity reservations: %w", nc.Name, err)
			}
			for _, cr := range out.CapacityReservations {
				res := v1.CapacityReservation{
					ID: aws.ToString(cr.CapacityReservationId), AvailabilityZone: aws.ToString(cr.AvailabilityZone),
					InstanceType: aws.ToString(cr.InstanceType), InstanceMatchCriteria: string(cr.InstanceMatchCriteria),
					OwnerID: aws.ToString(cr.OwnerId), ReservationType: cmp.Or(string(cr.ReservationType), v1.ReservationTypeDefault),
					Interruptible: aws.ToBool(cr.Interruptible),
				}
				if cr.EndDate != nil {
					res.EndTime = &metav1.Time{Time: *cr.EndDate}
				}
				byID[res.ID] = res
				available[res.ID] = int(aws.ToInt32(cr.AvailableInstanceCount))
			}
			if aws.ToString(out.NextToken) == "" {
				break
			}
			in.NextToken = out.NextToken
		}
	}
	found = slices.Collect(maps.Values(byID))
	slices.SortFunc(found, func(a, b v1.CapacityReservation) int { return strings.Compare(a.ID, b.ID) })
	return found, available, nil
}

// PlacementGroup resolves spec.placementGroupSelector (karpenter-spec
// §1.3, aws: pkg/providers/placementgroup): one DescribePlacementGroups
// call, with GroupIds for an id and the group-name filter for a name, and
// the filter state=available either way, as Karpenter asks. The first
// group EC2 answers is the class's. No selector: no call, nil. Errors:
// ErrPlacementGroupNotFound (wrapped, naming the selector) when no group
// in state available matches, an unknown id included (EC2 fails GroupIds
// naming an unknown group with InvalidPlacementGroup.Unknown); any other
// failed call (wrapped).
//
// Answers, found or not, are kept per selector for
// PlacementGroupRefreshInterval on the resolver's clock (Karpenter
// re-resolves the group once its one-minute cache entry lapses); failed
// calls are not kept.
func (r *Resolver) PlacementGroup(ctx context.Context, nc *v1.EC2NodeClass) (*v1.PlacementGroup, error) {
	sel := nc.Spec.PlacementGroupSelector
	if sel == nil {
		return nil, nil
	}
	key := sel.ID + "\x00" + sel.Name
	now := r.now()
	r.mu.Lock()
	e, ok := r.placementGroups[key]
	r.mu.Unlock()
	if !ok || now.Sub(e.at) >= PlacementGroupRefreshInterval || now.Before(e.at) {
		found, err := r.describePlacementGroup(ctx, sel)
		if err != nil {
			return nil, fmt.Errorf("node class %s: describe placement groups: %w", nc.Name, err)
		}
		e = placementGroupRead{at: now, found: found}
		r.mu.Lock()
		if r.placementGroups == nil {
			r.placementGroups = map[string]placementGroupRead{}
		}
		r.placementGroups[key] = e
		r.mu.Unlock()
	}
	if e.found == nil {
		what := fmt.Sprintf("name %q", sel.Name)
		if sel.ID != "" {
			what = fmt.Sprintf("id %q", sel.ID)
		}
		return nil, fmt.Errorf("node class %s: %w for spec.placementGroupSelector (%s)", nc.Name, ErrPlacementGroupNotFound, what)
	}
	pg := *e.found
	return &pg, nil
}

// PlacementGroupRefreshInterval is how long PlacementGroup keeps an
// answer: Karpenter's placement-group cache TTL (aws: pkg/cache/cache.go
// DefaultTTL, one minute).
const PlacementGroupRefreshInterval = time.Minute

// placementGroupRead is one DescribePlacementGroups answer (nil: no group
// available) and when it was read.
type placementGroupRead struct {
	at    time.Time
	found *v1.PlacementGroup
}

// describePlacementGroup asks EC2 for the group sel names; nil when none
// in state available matches.
func (r *Resolver) describePlacementGroup(ctx context.Context, sel *v1.PlacementGroupSelector) (*v1.PlacementGroup, error) {
	in := &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{string(ec2types.PlacementGroupStateAvailable)}}}}
	if sel.ID != "" {
		in.GroupIds = []string{sel.ID}
	} else {
		in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{sel.Name}})
	}
	out, err := r.ec2.DescribePlacementGroups(ctx, in)
	if awserr.Code(err) == "InvalidPlacementGroup.Unknown" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(out.PlacementGroups) == 0 {
		return nil, nil
	}
	g := out.PlacementGroups[0]
	return &v1.PlacementGroup{
		ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName), Strategy: string(g.Strategy),
		PartitionCount: aws.ToInt32(g.PartitionCount), SpreadLevel: string(g.SpreadLevel),
	}, nil
}
