package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
)

// Result is the outcome of a launch.
type Result struct {
	// Instance is the launched instance (zero when Launch failed).
	Instance launch.Instance
	// CapacityType is the capacity type requested.
	CapacityType string
	// InstanceTypes are the instance types requested (those with a launch
	// template and an override), cheapest first.
	InstanceTypes []string
	// Candidates are the launch plan's instance types of every capacity
	// type, cheapest first: the NodeClaim's candidates as the launch model
	// (shared/launch) narrowed them.
	Candidates []string
	// Unavailable are the offerings CreateFleet reported as unfulfillable,
	// set even when an instance launched; the caller marks each unavailable
	// for 3 minutes (InsufficientFreeAddressesInSubnet: the subnet).
	Unavailable []launch.UnavailableOffering
}

// Launch starts one instance for req.NodeClaim with a single instant
// CreateFleet call (karpenter-spec §4 steps 2-9):
//   - instance types: those the claim's requirements admit whose allocatable
//     holds its requests and that have an available offering the claim
//     allows in a zone with a subnet; then, unless a requirement has
//     minValues, GPU/accelerator/metal types are dropped when others remain
//     and, if both spot and on-demand are allowed, spot offerings pricier
//     than the cheapest on-demand offering are dropped; then the 60 cheapest
//     (keeping minValues satisfiable);
//   - capacity type: reserved, else spot, else on-demand, the first any
//     remaining type offers; spot uses price-capacity-optimized, on-demand
//     and reserved lowest-price;
//   - overrides: one per (type, zone) offering of that capacity type, in the
//     zone's subnet with the most free addresses, with the template's image
//     and the offering price as priority; one LaunchTemplateConfig per
//     template (version $Latest);
//   - TotalTargetCapacity 1, Type instant, the launch tags on the instance,
//     its volumes and the fleet, spec.context (unless minValues were
//     relaxed), and ClientToken(req.NodeClaim).
//
// Errors:
//   - *InsufficientCapacityError when no type qualifies (wrapping
//     ErrNoCompatibleOffering) or when EC2 returned no instance and only
//     capacity errors (Result.Unavailable lists them too);
//   - a wrapped *Error per other per-override error when no instance
//     launched (classify with awserr);
//   - a launch template that vanished before CreateFleet
//     (InvalidLaunchTemplateName.NotFoundException, as a call or a fleet
//     error) is ensured again through req.Templates and the call retried
//     once (with RetryClientToken when EC2 had created a fleet); a second
//     failure is returned;
//   - the CreateFleet call error, wrapped (e.g. throttling,
//     IdempotentParameterMismatch when a retry's request differs, which
//     req.Requests prevents: with it, the request first sent under the
//     token is sent again);
//   - with req.Requests, its error when the request cannot be recorded
//     (CreateFleet is then not called);
//   - invalid requests (missing claim, node class, cluster name or
//     templates; restricted spec.tags; unmeetable minValues).
func (c *Client) Launch(ctx context.Context, req Request) (Result, error) {
	if err := validate(&req); err != nil {
		return Result{}, fmt.Errorf("launch: %w", err)
	}
	claim := req.NodeClaim
	p, err := newPlan(&req)
	if err != nil {
		return Result{}, fmt.Errorf("launch nodeclaim %s: %w", claim.Name, err)
	}
	res := Result{CapacityType: p.CapacityType, Candidates: p.InstanceTypes()}
	configs, err := c.templateConfigs(ctx, &req, &p)
	if err != nil {
		return res, fmt.Errorf("launch nodeclaim %s: %w", claim.Name, err)
	}
	requested := map[string]bool{}
	for _, cfg := range configs {
		for _, ov := range cfg.Overrides {
			requested[string(ov.InstanceType)] = true
		}
	}
	for _, it := range p.types() {
		if requested[it.Name] {
			res.InstanceTypes = append(res.InstanceTypes, it.Name)
		}
	}
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		ClientToken:           aws.String(ClientToken(claim)),
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand,
		},
		TagSpecifications: tagSpecifications(amifamily.LaunchTags(req.ClusterName, claim.Labels[v1.LabelNodePool], req.NodeClass.Name, req.NodeClass.Spec.Tags),
			amifamily.ResourceInstance, amifamily.ResourceVolume, amifamily.ResourceFleet),
	}
	switch {
	case p.CapacityType == v1.CapacityTypeSpot:
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeSpot
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	case p.CapacityType == v1.CapacityTypeReserved && len(p.Offerings) > 0 && p.Offerings[0].ReservationType == v1.ReservationTypeCapacityBlock:
		// Capacity blocks launch as capacity-block, without on-demand
		// options (karpenter-spec §4 step 7); the plan holds one
		// reservation type.
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeCapacityBlock
	case p.CapacityType == v1.CapacityTypeReserved && len(p.Offerings) > 0 && p.Offerings[0].Interruptible:
		// Interruptible reservations launch as reserved-capacity with
		// their reservation type (karpenter-spec §4 step 7; EC2 API
		// ReservedCapacityOptionsRequest, which requires reserved-capacity).
		in.TargetCapacitySpecification.DefaultTargetCapacityType = ec2types.DefaultTargetCapacityTypeReservedCapacity
		in.ReservedCapacityOptions = &ec2types.ReservedCapacityOptionsRequest{ReservationTypes: []ec2types.FleetReservationType{ec2types.FleetReservationTypeInterruptibleCapacityReservation}}
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	default:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	if req.NodeClass.Spec.Context != nil && claim.Annotations[v1.AnnotationNodeClaimMinValuesRelaxed] != "true" {
		in.Context = aws.String(*req.NodeClass.Spec.Context)
	}
	res, err = c.createFleet(ctx, res, in, &p, claim.Name, req.Requests)
	if !templateVanished(err) {
		return res, err
	}
	// A launch template was deleted between its lookup and CreateFleet
	// (garbage collection removes unused ones). Karpenter invalidates its
	// template cache and retries once (karpenter-spec §4 step 9); here the
	// templates are ensured again, which re-creates the missing one.
	configs, rerr := c.templateConfigs(ctx, &req, &p)
	if rerr != nil {
		return res, fmt.Errorf("launch nodeclaim %s: after %w: %w", claim.Name, err, rerr)
	}
	retry := *in
	retry.LaunchTemplateConfigs = configs
	var fleetErr *Error
	if errors.As(err, &fleetErr) {
		// EC2 created a fleet that reports the error and keeps it under
		// the ClientToken: the retry needs its own, still derived from the
		// NodeClaim, so a redelivered retry is idempotent too. A rejected
		// call created no fleet and reuses the token.
		retry.ClientToken = aws.String(RetryClientToken(claim))
	}
	return c.createFleet(ctx, Result{CapacityType: res.CapacityType, InstanceTypes: res.InstanceTypes, Candidates: res.Candidates}, &retry, &p, claim.Name, req.Requests)
}

// createFleet makes the CreateFleet call and folds its response. With a
// request log, the request first recorded under the ClientToken is sent
// instead of in (see Request.Requests); the call is not made when the log
// cannot be read or written.
func (c *Client) createFleet(ctx context.Context, res Result, in *ec2.CreateFleetInput, p *plan, claimName string, log RequestLog) (Result, error) {
	if log != nil {
		replay, err := recordRequest(ctx, log, in)
		if err != nil {
			return res, fmt.Errorf("launch nodeclaim %s: %w", claimName, err)
		}
		in = replay
	}
	out, err := c.api.CreateFleet(ctx, in)
	if err != nil {
		return res, fmt.Errorf("launch nodeclaim %s: create fleet: %w", claimName, err)
	}
	return fold(res, out, in, p, claimName)
}

// recordRequest records in under its ClientToken and returns the request
// to send: in when it is the first under that token, else the stored one.
func recordRequest(ctx context.Context, log RequestLog, in *ec2.CreateFleetInput) (*ec2.CreateFleetInput, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("record create fleet request: %w", err)
	}
	stored, err := log.RecordRequest(ctx, aws.ToString(in.ClientToken), body)
	if err != nil {
		return nil, fmt.Errorf("record create fleet request: %w", err)
	}
	if bytes.Equal(stored, body) {
		return in, nil
	}
	var first ec2.CreateFleetInput
	if err := json.Unmarshal(stored, &first); err != nil {
		return nil, fmt.Errorf("replay create fleet request %s: %w", aws.ToString(in.ClientToken), err)
	}
	if aws.ToString(first.ClientToken) != aws.ToString(in.ClientToken) {
		return nil, fmt.Errorf("replay create fleet request: stored under %s, it carries token %s", aws.ToString(in.ClientToken), aws.ToString(first.ClientToken))
	}
	return &first, nil
}

// templateVanished reports whether err says a launch template named in the
// request does not exist (InvalidLaunchTemplateName.NotFoundException or
// InvalidLaunchTemplateId.NotFound), as a call error or a fleet error.
func templateVanished(err error) bool {
	if err == nil {
		return false
	}
	switch awserr.Code(err) {
	case awserr.CodeLaunchTemplateNameNotFound, codeLaunchTemplateIDNotFound:
		return true
	}
	return false
}

// codeLaunchTemplateIDNotFound is EC2's error for an unknown launch
// template ID.
const codeLaunchTemplateIDNotFound = "InvalidLaunchTemplateId.NotFound"

func validate(req *Request) error {
	switch {
	case req.NodeClaim == nil:
		return errors.New("nodeclaim: nil")
	case req.NodeClaim.UID == "" && req.NodeClaim.Name == "":
		return errors.New("nodeclaim: needs a UID or a name for the client token")
	case req.NodeClass == nil:
		return errors.New("node class: nil")
	case req.ClusterName == "":
		return errors.New("cluster name: required")
	case req.Templates == nil:
		return errors.New("templates: nil")
	}
	if err := amifamily.ValidateTags(req.NodeClass.Spec.Tags); err != nil {
		return fmt.Errorf("node class %s: %w", req.NodeClass.Name, err)
	}
	return nil
}

// templateConfigs asks for the launch templates (once, or once per
// reservation for reserved launches) and renders the plan's offerings into
// their overrides, in plan order; the config holding the plan's first
// (expected) offering comes first.
func (c *Client) templateConfigs(ctx context.Context, req *Request, p *plan) ([]ec2types.FleetLaunchTemplateConfigRequest, error) {
	types := p.types()
	byName := make(map[string]*catalog.InstanceType, len(types))
	for _, it := range types {
		byName[it.Name] = it
	}
	type group struct {
		reservation, reservationType string
		interruptible                bool
		types                        []*catalog.InstanceType
	}
	var groups []group
	if p.CapacityType == v1.CapacityTypeReserved {
		byID := map[string]int{}
		for _, o := range p.Offerings {
			i, ok := byID[o.ReservationID]
			if !ok {
				i = len(groups)
				byID[o.ReservationID] = i
				groups = append(groups, group{reservation: o.ReservationID, reservationType: o.ReservationType, interruptible: o.Interruptible})
			}
			if it := byName[o.InstanceType]; !slices.Contains(groups[i].types, it) {
				groups[i].types = append(groups[i].types, it)
			}
		}
	} else {
		groups = append(groups, group{types: types})
	}
	type config struct {
		cfg   ec2types.FleetLaunchTemplateConfigRequest
		first int // index in p.Offerings of its first override
	}
	var configs []config
	for _, g := range groups {
		lts, err := req.Templates.LaunchTemplates(ctx, TemplateRequest{CapacityType: p.CapacityType, ReservationID: g.reservation,
			ReservationType: g.reservationType, ReservationInterruptible: g.interruptible, InstanceTypes: g.types, Tenancy: p.Tenancy})
		if err != nil {
			return nil, fmt.Errorf("launch templates: %w", err)
		}
		for _, lt := range lts {
			serves := make(map[string]bool, len(lt.InstanceTypes))
			for _, name := range lt.InstanceTypes {
				serves[name] = true
			}
			var overrides []ec2types.FleetLaunchTemplateOverridesRequest
			first := -1
			seen := map[[2]string]bool{}
			for i, o := range p.Offerings {
				if !serves[o.InstanceType] || o.ReservationID != g.reservation || seen[[2]string{o.InstanceType, o.Zone}] {
					continue
				}
				seen[[2]string{o.InstanceType, o.Zone}] = true
				if first < 0 {
					first = i
				}
				overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{
					InstanceType:     ec2types.InstanceType(o.InstanceType),
					SubnetId:         aws.String(p.subnets[o.Zone].ID),
					AvailabilityZone: aws.String(o.Zone),
					ImageId:          aws.String(lt.ImageID),
					Priority:         aws.Float64(o.Price),
				})
			}
			if len(overrides) == 0 {
				continue
			}
			configs = append(configs, config{first: first, cfg: ec2types.FleetLaunchTemplateConfigRequest{
				LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
					LaunchTemplateName: aws.String(lt.Name),
					Version:            aws.String("$Latest"),
				},
				Overrides: overrides,
			}})
		}
	}
	if len(configs) == 0 {
		return nil, fmt.Errorf("launch templates: none serves any of the %d instance types", len(types))
	}
	slices.SortStableFunc(configs, func(a, b config) int { return a.first - b.first })
	out := make([]ec2types.FleetLaunchTemplateConfigRequest, len(configs))
	for i, c := range configs {
		out[i] = c.cfg
	}
	return out, nil
}

// tagSpecifications tags each resource type with tags, keys sorted.
func tagSpecifications(tags map[string]string, resourceTypes ...string) []ec2types.TagSpecification {
	var list []ec2types.Tag
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		list = append(list, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	out := make([]ec2types.TagSpecification, len(resourceTypes))
	for i, rt := range resourceTypes {
		out[i] = ec2types.TagSpecification{ResourceType: ec2types.ResourceType(rt), Tags: slices.Clone(list)}
	}
	return out
}

// fold turns a CreateFleet response into a Result or an error
// (karpenter-spec §4 step 9).
func fold(res Result, out *ec2.CreateFleetOutput, in *ec2.CreateFleetInput, p *plan, claimName string) (Result, error) {
	var fleetErrs []error
	allCapacity := true
	for _, e := range out.Errors {
		fe := &Error{Code: aws.ToString(e.ErrorCode), Message: aws.ToString(e.ErrorMessage), CapacityType: lifecycle(e.Lifecycle, p.CapacityType)}
		if lo := e.LaunchTemplateAndOverrides; lo != nil && lo.Overrides != nil {
			fe.InstanceType = string(lo.Overrides.InstanceType)
			fe.Zone = aws.ToString(lo.Overrides.AvailabilityZone)
			fe.SubnetID = aws.ToString(lo.Overrides.SubnetId)
			if fe.Zone == "" {
				fe.Zone = zoneOfSubnet(p, fe.SubnetID)
			}
		}
		switch {
		case fe.Code == awserr.CodeServiceLinkedRoleCreationNotPermitted:
			// No spot service-linked role: every spot offering is
			// unavailable (karpenter-spec §4 step 9).
			for _, o := range requestedOfferings(in) {
				o.CapacityType, o.Code = v1.CapacityTypeSpot, fe.Code
				res.Unavailable = appendUnique(res.Unavailable, o)
			}
		case awserr.ClassifyCode(fe.Code) == awserr.Unfulfillable && fe.InstanceType != "":
			res.Unavailable = appendUnique(res.Unavailable, launch.UnavailableOffering{
				OfferingKey: catalog.OfferingKey{InstanceType: fe.InstanceType, Zone: fe.Zone, CapacityType: fe.CapacityType}, Code: fe.Code, SubnetID: fe.SubnetID,
			})
		default:
			allCapacity = false
		}
		fleetErrs = append(fleetErrs, fe)
	}
	for _, fi := range out.Instances {
		if len(fi.InstanceIds) == 0 {
			continue
		}
		inst := launch.Instance{
			ID:           fi.InstanceIds[0],
			InstanceType: string(fi.InstanceType),
			Zone:         aws.ToString(fi.AvailabilityZone),
			ZoneID:       aws.ToString(fi.AvailabilityZoneId),
			SubnetID:     aws.ToString(fi.SubnetId),
			CapacityType: lifecycle(fi.Lifecycle, p.CapacityType),
			State:        string(ec2types.InstanceStateNamePending),
			// CreateFleet does not answer the placement: the instance has
			// the tenancy its launch templates set.
			Tenancy: p.Tenancy,
		}
		if lo := fi.LaunchTemplateAndOverrides; lo != nil && lo.Overrides != nil {
			ov := lo.Overrides
			inst.InstanceType = firstNonEmpty(inst.InstanceType, string(ov.InstanceType))
			inst.Zone = firstNonEmpty(inst.Zone, aws.ToString(ov.AvailabilityZone))
			inst.SubnetID = firstNonEmpty(inst.SubnetID, aws.ToString(ov.SubnetId))
			inst.ImageID = aws.ToString(ov.ImageId)
		}
		if inst.Zone == "" {
			inst.Zone = zoneOfSubnet(p, inst.SubnetID)
		}
		if s, ok := p.subnets[inst.Zone]; ok && inst.ZoneID == "" {
			inst.ZoneID = s.ZoneID
		}
		if inst.CapacityType == v1.CapacityTypeReserved {
			o := reservationOf(p, inst.InstanceType, inst.Zone)
			inst.ReservationID, inst.ReservationType = o.ReservationID, o.ReservationType
		}
		res.Instance = inst
		return res, nil
	}
	if len(fleetErrs) == 0 {
		return res, fmt.Errorf("launch nodeclaim %s: create fleet returned neither an instance nor an error", claimName)
	}
	if allCapacity {
		return res, &launch.InsufficientCapacityError{
			Offerings: slices.Clone(res.Unavailable),
			Reason:    fmt.Sprintf("create fleet for nodeclaim %s: %d offerings unfulfillable (%s)", claimName, len(res.Unavailable), codes(fleetErrs)),
			Err:       errors.Join(fleetErrs...),
		}
	}
	return res, fmt.Errorf("launch nodeclaim %s: create fleet: %w", claimName, errors.Join(fleetErrs...))
}

// lifecycle maps a CreateFleet lifecycle to a capacity type; reserved
// launches report on-demand.
func lifecycle(l ec2types.InstanceLifecycle, requested string) string {
	switch {
	case l == ec2types.InstanceLifecycleSpot:
		return v1.CapacityTypeSpot
	case requested == v1.CapacityTypeReserved:
		return v1.CapacityTypeReserved
	case l == ec2types.InstanceLifecycleOnDemand:
		return v1.CapacityTypeOnDemand
	}
	return requested
}

func requestedOfferings(in *ec2.CreateFleetInput) []launch.UnavailableOffering {
	var out []launch.UnavailableOffering
	for _, cfg := range in.LaunchTemplateConfigs {
		for _, ov := range cfg.Overrides {
			out = append(out, launch.UnavailableOffering{OfferingKey: catalog.OfferingKey{InstanceType: string(ov.InstanceType), Zone: aws.ToString(ov.AvailabilityZone)}, SubnetID: aws.ToString(ov.SubnetId)})
		}
	}
	return out
}

func appendUnique(list []launch.UnavailableOffering, o launch.UnavailableOffering) []launch.UnavailableOffering {
	if slices.Contains(list, o) {
		return list
	}
	return append(list, o)
}

func zoneOfSubnet(p *plan, subnetID string) string {
	for zone, s := range p.subnets {
		if s.ID == subnetID && subnetID != "" {
			return zone
		}
	}
	return ""
}

// reservationOf is the plan's reserved offering of the type in the zone
// (zero when there is none).
func reservationOf(p *plan, instanceType, zone string) launch.Offering {
	for _, o := range p.Offerings {
		if o.InstanceType == instanceType && o.Zone == zone {
			return o
		}
	}
	return launch.Offering{}
}

func codes(errs []error) string {
	var out []string
	for _, e := range errs {
		if code := awserr.Code(e); !slices.Contains(out, code) {
			out = append(out, code)
		}
	}
	return strings.Join(out, ", ")
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
