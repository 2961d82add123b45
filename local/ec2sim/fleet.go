package ec2sim

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Capacity types as CreateFleet spells them.
const (
	capacitySpot     = "spot"
	capacityOnDemand = "on-demand"
)

// fleet is one CreateFleet call that succeeded (instant fleets are
// complete when the call returns).
type fleet struct {
	seq         int // creation order
	id, token   string
	created     time.Time
	tags        map[string]string
	fingerprint string
	resp        *createFleetResponse
}

// Fleet is a snapshot of an instant fleet.
type Fleet struct {
	ID          string            `json:"id"`
	ClientToken string            `json:"clientToken"`
	CreateTime  time.Time         `json:"createTime"`
	Tags        map[string]string `json:"tags"`
	// InstanceIDs lists the launched instances in launch order.
	InstanceIDs []string `json:"instanceIds"`
	// Errors lists the per-override errors returned, as "code: message".
	Errors []string `json:"errors"`
}

// Fleets returns every fleet created, oldest first.
func (s *Server) Fleets() []Fleet {
	s.mu.Lock()
	defer s.mu.Unlock()
	fleets := slices.SortedFunc(maps.Values(s.fleets), func(a, b *fleet) int { return a.seq - b.seq })
	var out []Fleet
	for _, f := range fleets {
		fl := Fleet{ID: f.id, ClientToken: f.token, CreateTime: f.created, Tags: maps.Clone(f.tags)}
		for _, in := range f.resp.Instances {
			fl.InstanceIDs = append(fl.InstanceIDs, in.InstanceIDs...)
		}
		for _, e := range f.resp.Errors {
			fl.Errors = append(fl.Errors, e.ErrorCode+": "+e.ErrorMessage)
		}
		out = append(out, fl)
	}
	return out
}

// SetUnavailable makes CreateFleet fail every override of matching pools
// with code (InsufficientInstanceCapacity when empty; any code of
// karpenter-spec §4 step 9 works, e.g. MaxSpotInstanceCountExceeded) until
// ClearUnavailable. An empty field of o matches every value, so
// Offering{CapacityType: "spot"} exhausts all Spot capacity.
func (s *Server) SetUnavailable(o Offering, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == "" {
		code = "InsufficientInstanceCapacity"
	}
	s.ice[o] = code
}

// ClearUnavailable removes an entry set by SetUnavailable (the same o).
func (s *Server) ClearUnavailable(o Offering) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ice, o)
}

// SetSpotPrice sets the Spot price of one (instance type, zone) pool, per
// hour, from the simulator's now on: it replaces the world's price model
// for that pool (on-demand × ratio, or the realistic world's moving
// price) and is one more point of DescribeSpotPriceHistory.
func (s *Server) SetSpotPrice(instanceType, zone string, price float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := poolKey{instanceType, zone}
	s.spotPrice[k] = append(s.spotPrice[k], pricePoint{at: s.clock.Now(), price: price})
}

// unavailableCode returns the injected error code of a pool, or "".
func (s *Server) unavailableCode(instanceType, zone, capacityType string) string {
	if code, ok := s.ice[Offering{instanceType, zone, capacityType}]; ok {
		return code
	}
	keys := slices.SortedFunc(maps.Keys(s.ice), func(a, b Offering) int {
		return strings.Compare(a.InstanceType+"/"+a.Zone+"/"+a.CapacityType, b.InstanceType+"/"+b.Zone+"/"+b.CapacityType)
	})
	for _, o := range keys {
		if (o.InstanceType == "" || o.InstanceType == instanceType) && (o.Zone == "" || o.Zone == zone) &&
			(o.CapacityType == "" || o.CapacityType == capacityType) {
			return s.ice[o]
		}
	}
	return ""
}

// override is one candidate pool of a CreateFleet call: a launch template
// config's override resolved to a concrete subnet and zone.
type override struct {
	index        int // order of appearance, the tie-breaker
	lt           *launchTemplate
	spec         ltSpecXML
	instanceType string
	subnet       *subnet
	zone         zone
	imageID      string
	priority     *float64
	maxPrice     string
}

type ltSpecXML struct {
	LaunchTemplateID   string `xml:"launchTemplateId"`
	LaunchTemplateName string `xml:"launchTemplateName,omitempty"`
	Version            string `xml:"version"`
}

type overridesXML struct {
	InstanceType     string   `xml:"instanceType"`
	SubnetID         string   `xml:"subnetId"`
	AvailabilityZone string   `xml:"availabilityZone"`
	ImageID          string   `xml:"imageId,omitempty"`
	MaxPrice         string   `xml:"maxPrice,omitempty"`
	Priority         *float64 `xml:"priority,omitempty"`
}

type ltAndOverridesXML struct {
	LaunchTemplateSpecification ltSpecXML    `xml:"launchTemplateSpecification"`
	Overrides                   overridesXML `xml:"overrides"`
}

type fleetErrorXML struct {
	LaunchTemplateAndOverrides ltAndOverridesXML `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string            `xml:"lifecycle"`
	ErrorCode                  string            `xml:"errorCode"`
	ErrorMessage               string            `xml:"errorMessage"`
}

type fleetInstanceXML struct {
	LaunchTemplateAndOverrides ltAndOverridesXML `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string            `xml:"lifecycle"`
	InstanceIDs                []string          `xml:"instanceIds>item"`
	InstanceType               string            `xml:"instanceType"`
	Platform                   string            `xml:"platform,omitempty"`
}

type createFleetResponse struct {
	respHeader
	FleetID   string             `xml:"fleetId"`
	Errors    []fleetErrorXML    `xml:"errorSet>item"`
	Instances []fleetInstanceXML `xml:"fleetInstanceSet>item"`
}

func (o *override) xml() ltAndOverridesXML {
	return ltAndOverridesXML{
		LaunchTemplateSpecification: o.spec,
		Overrides: overridesXML{InstanceType: o.instanceType, SubnetID: o.subnet.id, AvailabilityZone: o.zone.name,
			ImageID: o.imageID, MaxPrice: o.maxPrice, Priority: o.priority},
	}
}

// fingerprint canonicalises a request without its ClientToken, so a
// replayed token can be checked against the original parameters.
func fingerprint(q *qnode) string {
	flat := q.flatten()
	delete(flat, "ClientToken")
	delete(flat, "Action")
	delete(flat, "Version")
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(flat)) {
		b.WriteString(k + "=" + flat[k] + "\n")
	}
	return b.String()
}

var (
	spotStrategies     = []string{"lowest-price", "diversified", "capacity-optimized", "capacity-optimized-prioritized", "price-capacity-optimized"}
	onDemandStrategies = []string{"lowest-price", "prioritized"}
	fleetTagTypes      = []string{"instance", "volume", "fleet", "network-interface", "spot-instances-request"}
)

// createFleet follows EC2 CreateFleet for Type=instant:
//   - ClientToken: a token seen before returns the first answer (same fleet
//     and instance IDs, nothing launched); with different parameters it
//     fails with IdempotentParameterMismatch.
//   - Capacity: TotalTargetCapacity instances, OnDemandTargetCapacity and
//     SpotTargetCapacity of their type and the rest of
//     DefaultTargetCapacityType (default on-demand; capacity-block and
//     reserved-capacity launch into the launch template's target
//     reservation, priced and allocated as on-demand).
//   - Capacity reservations: each on-demand instance uses the reservation
//     reservationFor picks (its AvailableInstanceCount drops by one until
//     the instance terminates); a reservation that cannot take it is a
//     per-override error (ReservationCapacityExceeded when full).
//   - Pools: every override of every launch-template config, each resolved
//     to a subnet (its SubnetId, else a subnet of its AvailabilityZone,
//     else the template's network interface subnet, else one override per
//     zone). Each instance goes to the first pool that can take it, in the
//     order of the allocation strategy: price, or Priority for
//     "prioritized" and "capacity-optimized-prioritized" (see the package
//     documentation).
//   - Errors: a pool that cannot take an instance (injected insufficient
//     capacity, no free address, unknown or mismatched AMI, unknown security
//     group, Spot price above MaxPrice, Spot request tags on an on-demand
//     launch) yields one errorSet entry and the next pool is tried, so one
//     answer can hold both Instances and Errors.
//
// Errors in the request itself (unknown launch template or subnet, bad tags,
// unsupported fleet type or strategy) fail the whole call, as EC2 does.
// With the request valid, the permission check (authorize) follows: a
// denied call fails with UnauthorizedOperation and a dry run answers
// DryRunOperation; neither creates anything, and a dry run neither reads
// nor records its ClientToken.
func (s *Server) createFleet(q *qnode, now time.Time) (response, error) {
	dryRun, err := dryRunParam(q)
	if err != nil {
		return nil, err
	}
	token := q.str("ClientToken")
	fp := fingerprint(q)
	if token != "" && !dryRun {
		if f, ok := s.tokens[token]; ok {
			if f.fingerprint != fp {
				return nil, errorf("IdempotentParameterMismatch", "The client token %s is already in use with different request parameters.", token)
			}
			return f.resp, nil
		}
	}
	if typ := q.str("Type"); typ != "instant" {
		if typ == "" {
			typ = "maintain"
		}
		return nil, errorf("UnsupportedOperation", "The simulator supports only instant fleets, not %q.", typ)
	}
	total, ok, err := q.intParam("TargetCapacitySpecification.TotalTargetCapacity")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, missingParameter("TargetCapacitySpecification.TotalTargetCapacity")
	}
	if total < 1 {
		return nil, invalidParameterValue("TotalTargetCapacity must be at least 1.")
	}
	counts, err := capacityCounts(q, total)
	if err != nil {
		return nil, err
	}
	spotStrategy := cmp.Or(q.str("SpotOptions.AllocationStrategy"), "lowest-price")
	odStrategy := cmp.Or(q.str("OnDemandOptions.AllocationStrategy"), "lowest-price")
	if !slices.Contains(spotStrategies, spotStrategy) {
		return nil, invalidParameterValue("The allocation strategy '%s' is not valid for Spot.", spotStrategy)
	}
	if !slices.Contains(onDemandStrategies, odStrategy) {
		return nil, invalidParameterValue("The allocation strategy '%s' is not valid for On-Demand.", odStrategy)
	}
	specs := tagSpecs(q.list("TagSpecification"))
	for rt, tags := range specs {
		if !slices.Contains(fleetTagTypes, rt) {
			return nil, invalidParameterValue("'%s' is not a valid taggable resource type for this operation.", rt)
		}
		if err := validateTags(tags, nil); err != nil {
			return nil, err
		}
	}
	overrides, err := s.fleetOverrides(q)
	if err != nil {
		return nil, err
	}
	if err := s.authorize("CreateFleet", q, "fleet/*"); err != nil {
		return nil, err
	}

	f := &fleet{seq: len(s.fleets), id: "fleet-" + s.newUUID("fleet"), token: token, created: now, tags: tagMap(specs["fleet"]), fingerprint: fp}
	resp := &createFleetResponse{FleetID: f.id}
	reservation := ""
	for _, ct := range []string{capacityOnDemand, capacitySpot, capacityBlock, capacityReserved} {
		n := counts[ct]
		if n == 0 {
			continue
		}
		strategy := odStrategy
		if ct == capacitySpot {
			strategy = spotStrategy
		}
		pools := s.orderPools(overrides, marketOf(ct), strategy)
		failed := map[int]bool{}
		for range n {
			launched := false
			for _, o := range pools {
				if failed[o.index] {
					continue
				}
				code, msg := s.poolError(o, marketOf(ct), specs)
				var cr *CapacityReservation
				if code == "" {
					cr, code, msg = s.reservationFor(o, ct, now)
				}
				if code != "" {
					failed[o.index] = true
					resp.Errors = append(resp.Errors, fleetErrorXML{LaunchTemplateAndOverrides: o.xml(), Lifecycle: marketOf(ct), ErrorCode: code, ErrorMessage: msg})
					continue
				}
				if reservation == "" {
					reservation = s.newID("r")
				}
				in := s.launch(o, marketOf(ct), f, reservation, specs, now)
				if cr != nil {
					cr.AvailableInstanceCount--
					in.capacityReservationID = cr.ID
					in.capacityBlock = cr.ReservationType == ReservationTypeCapacityBlock
				}
				resp.addInstance(o, marketOf(ct), in)
				launched = true
				break
			}
			if !launched {
				break
			}
		}
	}
	f.resp = resp
	s.fleets[f.id] = f
	if token != "" {
		s.tokens[token] = f
	}
	return resp, nil
}

// capacityCounts splits the target capacity by capacity type.
func capacityCounts(q *qnode, total int) (map[string]int, error) {
	def := cmp.Or(q.str("TargetCapacitySpecification.DefaultTargetCapacityType"), capacityOnDemand)
	if !slices.Contains([]string{capacitySpot, capacityOnDemand, capacityBlock, capacityReserved}, def) {
		return nil, invalidParameterValue("Value (%s) for parameter DefaultTargetCapacityType is invalid.", def)
	}
	od, _, err := q.intParam("TargetCapacitySpecification.OnDemandTargetCapacity")
	if err != nil {
		return nil, err
	}
	spot, _, err := q.intParam("TargetCapacitySpecification.SpotTargetCapacity")
	if err != nil {
		return nil, err
	}
	if od < 0 || spot < 0 || od+spot > total {
		return nil, invalidParameterValue("OnDemandTargetCapacity plus SpotTargetCapacity must not exceed TotalTargetCapacity.")
	}
	counts := map[string]int{capacityOnDemand: od, capacitySpot: spot}
	counts[def] += total - od - spot
	return counts, nil
}

// fleetOverrides resolves every launch-template config into pools.
func (s *Server) fleetOverrides(q *qnode) ([]*override, error) {
	configs := q.list("LaunchTemplateConfigs")
	if len(configs) == 0 {
		return nil, missingParameter("LaunchTemplateConfigs")
	}
	var out []*override
	for _, cfg := range configs {
		spec := cfg.get("LaunchTemplateSpecification")
		lt, err := s.resolveTemplate(spec)
		if err != nil {
			return nil, err
		}
		if _, _, err := s.placeInGroup(lt.data); err != nil {
			return nil, err
		}
		specXML := ltSpecXML{LaunchTemplateID: lt.id, LaunchTemplateName: spec.str("LaunchTemplateName"), Version: "1"}
		members := cfg.list("Overrides")
		if len(members) == 0 {
			members = []*qnode{{}}
		}
		for _, m := range members {
			base := override{lt: lt, spec: specXML, instanceType: cmp.Or(m.str("InstanceType"), lt.data.instanceType),
				imageID: cmp.Or(m.str("ImageId"), lt.data.imageID), maxPrice: m.str("MaxPrice")}
			if base.instanceType == "" {
				return nil, missingParameter("InstanceType")
			}
			if m.has("Priority") {
				p, err := strconv.ParseFloat(m.str("Priority"), 64)
				if err != nil {
					return nil, invalidParameterValue("Value (%s) for parameter Priority is invalid.", m.str("Priority"))
				}
				base.priority = &p
			}
			subnets, err := s.overrideSubnets(m.str("SubnetId"), m.str("AvailabilityZone"), lt)
			if err != nil {
				return nil, err
			}
			for _, sn := range subnets {
				o := base
				o.index = len(out)
				o.subnet = sn
				o.zone, _ = s.zoneByName(sn.zone)
				out = append(out, &o)
			}
		}
	}
	return out, nil
}

// overrideSubnets picks the subnet(s) an override launches into.
func (s *Server) overrideSubnets(subnetID, zoneName string, lt *launchTemplate) ([]*subnet, error) {
	if subnetID != "" {
		sn := s.subnetByID(subnetID)
		if sn == nil {
			return nil, errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", subnetID)
		}
		if zoneName != "" && zoneName != sn.zone {
			return nil, invalidParameterValue("The subnet '%s' is not in Availability Zone '%s'.", subnetID, zoneName)
		}
		return []*subnet{sn}, nil
	}
	var ltSubnet *subnet
	if len(lt.data.nis) > 0 && lt.data.nis[0].subnetID != "" {
		ltSubnet = s.subnetByID(lt.data.nis[0].subnetID)
		if ltSubnet == nil {
			return nil, errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", lt.data.nis[0].subnetID)
		}
	}
	if zoneName != "" {
		if _, ok := s.zoneByName(zoneName); !ok {
			return nil, invalidParameterValue("Invalid availability zone: [%s]", zoneName)
		}
		if ltSubnet != nil && ltSubnet.zone == zoneName {
			return []*subnet{ltSubnet}, nil
		}
		for _, sn := range s.subnets {
			if sn.zone == zoneName {
				return []*subnet{sn}, nil
			}
		}
	}
	if ltSubnet != nil {
		return []*subnet{ltSubnet}, nil
	}
	var out []*subnet
	for _, z := range s.zones {
		for _, sn := range s.subnets {
			if sn.zone == z.name {
				out = append(out, sn)
				break
			}
		}
	}
	return out, nil
}

// orderPools sorts the pools for one capacity type: by Priority (lowest
// first; unset last) for the prioritized strategies, else by price; ties
// keep request order.
func (s *Server) orderPools(overrides []*override, capacityType, strategy string) []*override {
	type pool struct {
		o               *override
		priority, price float64
	}
	pools := make([]pool, len(overrides))
	for i, o := range overrides {
		pools[i] = pool{o: o, priority: math.Inf(1), price: math.Inf(1)}
		if o.priority != nil {
			pools[i].priority = *o.priority
		}
		if f := s.types.byName[o.instanceType]; f != nil {
			pools[i].price = s.price(f, o.zone.name, capacityType)
		}
	}
	prioritized := strategy == "prioritized" || strategy == "capacity-optimized-prioritized"
	slices.SortStableFunc(pools, func(a, b pool) int {
		if prioritized {
			if c := compareFloat(a.priority, b.priority); c != 0 {
				return c
			}
		}
		return compareFloat(a.price, b.price)
	})
	out := make([]*override, len(pools))
	for i, p := range pools {
		out[i] = p.o
	}
	return out
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// poolError returns the error code and message EC2 would give for
// launching one instance in pool o now, or "" when it can.
func (s *Server) poolError(o *override, capacityType string, specs map[string][]tag) (code, msg string) {
	f := s.types.byName[o.instanceType]
	if f == nil {
		return "InvalidParameterValue", fmt.Sprintf("The instance type '%s' does not exist.", o.instanceType)
	}
	if !s.offeredIn(o.instanceType, o.zone.name) {
		var offered []string
		for _, z := range s.zones {
			if s.offeredIn(o.instanceType, z.name) {
				offered = append(offered, z.name)
			}
		}
		return "Unsupported", fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s). Please retry your request by not specifying an Availability Zone or choosing %s.",
			o.instanceType, o.zone.name, strings.Join(offered, ", "))
	}
	if capacityType == capacityOnDemand && len(specs["spot-instances-request"]) > 0 {
		return "InvalidParameterValue", "You cannot specify tags for Spot instances requests if there are no Spot instances requests being created by the request."
	}
	if o.imageID == "" {
		return "MissingParameter", "The request must contain the parameter ImageId"
	}
	img := s.imageByID(o.imageID)
	if img == nil {
		return "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", o.imageID)
	}
	if img.Architecture != f.arch {
		return "InvalidParameterValue", fmt.Sprintf("The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI. Specify an instance type and an AMI that have matching architectures, and try again.", f.arch, img.Architecture)
	}
	if s.profileLookup != nil {
		switch d := o.lt.data; {
		case d.iamProfileArn != "":
			if _, ok := s.profileLookup(d.iamProfileArn); !ok {
				return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN", d.iamProfileArn)
			}
		case d.iamProfileName != "":
			if _, ok := s.profileLookup(d.iamProfileName); !ok {
				return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", d.iamProfileName)
			}
		}
	}
	for _, g := range s.templateGroups(o.lt) {
		if s.groupByID(g) == nil {
			return "InvalidGroup.NotFound", fmt.Sprintf("The security group '%s' does not exist in VPC '%s'", g, s.vpcID)
		}
	}
	if code := s.unavailableCode(o.instanceType, o.zone.name, capacityType); code != "" {
		return code, capacityMessage(code, o, capacityType, s.zoneNames())
	}
	if zone := s.clusterGroupZone(o.lt.data); zone != "" && zone != o.zone.name {
		// A cluster placement group lives in one Availability Zone: once
		// it holds an instance, EC2 refuses other zones' overrides as a
		// capacity shortage.
		return "InsufficientInstanceCapacity", fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s) for placement group instances. Instances of a cluster placement group run in %s.",
			o.instanceType, o.zone.name, zone)
	}
	if capacityType == capacitySpot && o.maxPrice != "" {
		limit, err := strconv.ParseFloat(o.maxPrice, 64)
		if p := s.price(f, o.zone.name, capacitySpot); err == nil && p > limit {
			return "SpotMaxPriceTooLow", fmt.Sprintf("Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %s.", o.maxPrice, strconv.FormatFloat(p, 'f', -1, 64))
		}
	}
	if o.subnet.available <= 0 || len(o.subnet.free) == 0 && int(o.subnet.next) >= subnetCapacity(o.subnet.cidr) {
		return "InsufficientFreeAddressesInSubnet", fmt.Sprintf("There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", o.subnet.id)
	}
	return "", ""
}

// capacityMessage is the message EC2 sends with a capacity error code.
func capacityMessage(code string, o *override, capacityType string, zones []string) string {
	switch code {
	case "InsufficientInstanceCapacity":
		if capacityType == capacitySpot {
			return "There is no Spot capacity available that matches your request."
		}
		others := slices.DeleteFunc(slices.Clone(zones), func(z string) bool { return z == o.zone.name })
		return fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing %s.",
			o.instanceType, o.zone.name, o.instanceType, strings.Join(others, ", "))
	case "MaxSpotInstanceCountExceeded":
		return "Max spot instance count exceeded"
	case "VcpuLimitExceeded":
		return "You have requested more vCPU capacity than your current vCPU limit allows for the instance bucket that the specified instance type belongs to."
	case "UnfulfillableCapacity":
		return "Unable to fulfill capacity due to your request configuration. Please adjust your request and try again."
	case "Unsupported":
		return fmt.Sprintf("The requested configuration is currently not supported. Please check the documentation for supported configurations. (%s in %s)", o.instanceType, o.zone.name)
	}
	return code
}

// templateGroups returns the security groups a template attaches: its
// SecurityGroupId list, else its first network interface's groups.
func (s *Server) templateGroups(lt *launchTemplate) []string {
	if len(lt.data.securityGroupIDs) > 0 {
		return lt.data.securityGroupIDs
	}
	if len(lt.data.nis) > 0 {
		return lt.data.nis[0].groups
	}
	return nil
}

// launch creates one instance in pool o.
func (s *Server) launch(o *override, capacityType string, f *fleet, reservation string, specs map[string][]tag, now time.Time) *instance {
	ft := s.types.byName[o.instanceType]
	img := s.imageByID(o.imageID)
	ip, _ := o.subnet.allocateIP()
	lt := o.lt
	in := &instance{
		id: s.newID("i"), instanceType: o.instanceType, zone: o.zone.name, zoneID: o.zone.id, subnetID: o.subnet.id,
		vpcID: s.vpcID, privateIP: ip, privateDNS: s.privateDNSName(ip), imageID: o.imageID, arch: ft.arch,
		// DescribeInstances reports hypervisor "xen" for Nitro instances too
		// (the field only tells xen from ovm).
		platform: img.Platform, hypervisor: "xen", capacityType: capacityType,
		launchTime: now.UTC().Truncate(time.Second), runningAt: now.Add(s.bootDelay), state: StatePending,
		userData: lt.data.userData, ltID: lt.id, ltName: lt.name, ltVersion: "1", fleetID: f.id,
		reservationID: reservation, clientToken: f.id, groups: slices.Clone(s.templateGroups(lt)),
		metadata: maps.Clone(lt.data.metadata), tenancy: cmp.Or(lt.data.tenancy, "default"), crPreference: lt.data.crPreference, crTarget: lt.data.crTarget,
	}
	if len(in.groups) == 0 {
		in.groups = []string{s.groups[0].id}
	}
	// The call's overrides were checked against the group (placeInGroup).
	if g, partition, _ := s.placeInGroup(lt.data); g != nil {
		in.placementGroupID, in.placementGroupName, in.partition = g.ID, g.Name, partition
	}
	if capacityType == capacitySpot {
		in.spotRequestID = "sir-" + hashHex("sir/"+in.id, 8)
	}
	switch {
	case lt.data.iamProfileArn != "":
		in.iamProfile = lt.data.iamProfileArn
	case lt.data.iamProfileName != "":
		in.iamProfile = "arn:aws:iam::" + s.accountID + ":instance-profile/" + lt.data.iamProfileName
		if s.profileLookup != nil {
			in.iamProfile, _ = s.profileLookup(lt.data.iamProfileName)
		}
	}
	in.tags = tagMap(lt.data.tagSpecs["instance"])
	maps.Copy(in.tags, tagMap(specs["instance"]))
	in.tags["aws:ec2:fleet-id"] = f.id
	in.tags["aws:ec2launchtemplate:id"] = lt.id
	in.tags["aws:ec2launchtemplate:version"] = "1"
	volumeTags := tagMap(lt.data.tagSpecs["volume"])
	maps.Copy(volumeTags, tagMap(specs["volume"]))
	bdms := lt.data.bdms
	if len(bdms) == 0 {
		bdms = []BlockDeviceMapping{{DeviceName: img.RootDeviceName, VolumeSizeGiB: img.RootVolumeGiB, VolumeType: "gp2", DeleteOnTermination: true}}
	}
	for _, b := range bdms {
		size := b.VolumeSizeGiB
		if size == 0 && b.DeviceName == img.RootDeviceName {
			size = img.RootVolumeGiB
		}
		in.volumes = append(in.volumes, &volume{id: s.newID("vol"), device: b.DeviceName, volumeType: cmp.Or(b.VolumeType, "gp2"),
			sizeGiB: size, encrypted: b.Encrypted, deleteOnTerm: b.DeleteOnTermination, tags: maps.Clone(volumeTags)})
	}
	s.instances[in.id] = in
	s.order = append(s.order, in.id)
	s.emit(DetailTypeStateChange, in.id, now, map[string]string{"state": StatePending})
	return in
}

// addInstance groups launched instances by pool, as EC2 does.
func (r *createFleetResponse) addInstance(o *override, capacityType string, in *instance) {
	x := o.xml()
	for i := range r.Instances {
		if r.Instances[i].Lifecycle == capacityType && r.Instances[i].LaunchTemplateAndOverrides.Overrides.InstanceType == x.Overrides.InstanceType &&
			r.Instances[i].LaunchTemplateAndOverrides.Overrides.SubnetID == x.Overrides.SubnetID &&
			r.Instances[i].LaunchTemplateAndOverrides.LaunchTemplateSpecification == x.LaunchTemplateSpecification {
			r.Instances[i].InstanceIDs = append(r.Instances[i].InstanceIDs, in.id)
			return
		}
	}
	platform := ""
	if in.platform == "windows" {
		platform = "Windows"
	}
	r.Instances = append(r.Instances, fleetInstanceXML{LaunchTemplateAndOverrides: x, Lifecycle: capacityType,
		InstanceIDs: []string{in.id}, InstanceType: in.instanceType, Platform: platform})
}
