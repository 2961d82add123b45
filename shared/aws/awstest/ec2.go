package awstest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Pool is an (instance type, zone, capacity type) capacity pool.
type Pool struct {
	InstanceType string
	Zone         string
	// CapacityType is "spot" or "on-demand".
	CapacityType string
}

// EC2Calls holds the scriptable calls of an EC2 double.
type EC2Calls struct {
	CreateFleet             Call[ec2.CreateFleetInput, ec2.CreateFleetOutput]
	TerminateInstances      Call[ec2.TerminateInstancesInput, ec2.TerminateInstancesOutput]
	DescribeInstances       Call[ec2.DescribeInstancesInput, ec2.DescribeInstancesOutput]
	DescribeSubnets         Call[ec2.DescribeSubnetsInput, ec2.DescribeSubnetsOutput]
	DescribeSecurityGroups  Call[ec2.DescribeSecurityGroupsInput, ec2.DescribeSecurityGroupsOutput]
	DescribeImages          Call[ec2.DescribeImagesInput, ec2.DescribeImagesOutput]
	DescribeLaunchTemplates Call[ec2.DescribeLaunchTemplatesInput, ec2.DescribeLaunchTemplatesOutput]
	CreateLaunchTemplate    Call[ec2.CreateLaunchTemplateInput, ec2.CreateLaunchTemplateOutput]
	// DescribeCapacityReservations answers with no reservations unless
	// scripted.
	DescribeCapacityReservations Call[ec2.DescribeCapacityReservationsInput, ec2.DescribeCapacityReservationsOutput]
	// DescribePlacementGroups answers from the groups AddPlacementGroup
	// added unless scripted.
	DescribePlacementGroups Call[ec2.DescribePlacementGroupsInput, ec2.DescribePlacementGroupsOutput]
}

// EC2 is an in-memory EC2 for fleet.EC2API and nodeclass.EC2API.
type EC2 struct {
	// On scripts and records each operation.
	On EC2Calls
	// UnavailablePools makes CreateFleet report InsufficientInstanceCapacity
	// for overrides in these pools. Set it before use or through
	// SetUnavailable.
	UnavailablePools map[Pool]bool
	// PageSize, when positive, splits DescribeInstances results into pages
	// of this many reservations (NextToken).
	PageSize int
	// Now is the double's clock (launch times, deprecation); it defaults to
	// 2026-01-01T00:00:00Z.
	Now func() time.Time

	t  testing.TB
	mu sync.Mutex

	subnets   []ec2types.Subnet
	groups    []ec2types.SecurityGroup
	images    []ec2types.Image
	instances []ec2types.Instance
	pgroups   []ec2types.PlacementGroup
	templates []launchTemplate
	fleets    map[string]fleetRecord // ClientToken -> first request and response
	ltTokens  map[string]string      // CreateLaunchTemplate ClientToken -> name
	seq       int
}

type launchTemplate struct {
	id, name string
	data     *ec2types.RequestLaunchTemplateData
	tags     []ec2types.Tag
}

type fleetRecord struct {
	in  *ec2.CreateFleetInput
	out *ec2.CreateFleetOutput
}

// NewEC2 returns an empty EC2 double that reports unsupported requests to t.
func NewEC2(t testing.TB) *EC2 {
	return &EC2{
		t:                t,
		UnavailablePools: map[Pool]bool{},
		Now:              func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) },
		fleets:           map[string]fleetRecord{},
		ltTokens:         map[string]string{},
	}
}

// SetUnavailable marks pools unavailable (true) or available (false).
func (e *EC2) SetUnavailable(available bool, pools ...Pool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range pools {
		if available {
			delete(e.UnavailablePools, p)
		} else {
			e.UnavailablePools[p] = true
		}
	}
}

// AddSubnet adds a subnet (available state).
func (e *EC2) AddSubnet(id, zone, zoneID string, availableIPs int32, tags map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.subnets = append(e.subnets, ec2types.Subnet{
		SubnetId: aws.String(id), AvailabilityZone: aws.String(zone), AvailabilityZoneId: aws.String(zoneID),
		AvailableIpAddressCount: aws.Int32(availableIPs), State: ec2types.SubnetStateAvailable, Tags: tagList(tags),
	})
}

// AddSecurityGroup adds a security group.
func (e *EC2) AddSecurityGroup(id, name string, tags map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.groups = append(e.groups, ec2types.SecurityGroup{GroupId: aws.String(id), GroupName: aws.String(name), Tags: tagList(tags)})
}

// AddImage adds an image; its State defaults to available.
func (e *EC2) AddImage(img ec2types.Image) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if img.State == "" {
		img.State = ec2types.ImageStateAvailable
	}
	e.images = append(e.images, img)
}

// AddPlacementGroup adds a placement group as DescribePlacementGroups
// lists it; State defaults to available.
func (e *EC2) AddPlacementGroup(pg ec2types.PlacementGroup) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if pg.State == "" {
		pg.State = ec2types.PlacementGroupStateAvailable
	}
	e.pgroups = append(e.pgroups, pg)
}

// AddInstance adds an existing instance.
func (e *EC2) AddInstance(inst ec2types.Instance) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.instances = append(e.instances, inst)
}

// AddLaunchTemplate adds a launch template with an image, as if created
// earlier.
func (e *EC2) AddLaunchTemplate(name, imageID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	e.templates = append(e.templates, launchTemplate{id: fmt.Sprintf("lt-%017x", e.seq), name: name, data: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(imageID)}})
}

// Instances returns a copy of every instance, in launch order.
func (e *EC2) Instances() []ec2types.Instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.instances)
}

// LaunchTemplateNames returns the names of the launch templates, sorted.
func (e *EC2) LaunchTemplateNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, lt := range e.templates {
		out = append(out, lt.name)
	}
	sort.Strings(out)
	return out
}

// LaunchTemplateData returns the data and tags a launch template was
// created with; ok is false when there is none by that name.
func (e *EC2) LaunchTemplateData(name string) (data *ec2types.RequestLaunchTemplateData, tags []ec2types.Tag, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, lt := range e.templates {
		if lt.name == name {
			return lt.data, lt.tags, true
		}
	}
	return nil, nil, false
}

// unsupported reports a request the double cannot answer faithfully; it
// fails the test (from any goroutine) and returns an error.
func (e *EC2) unsupported(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	e.t.Errorf("awstest.EC2: unsupported request: %s", msg)
	return APIError("UnsupportedOperation", msg)
}

// CreateFleet launches one instance for an instant fleet: it tries the
// overrides in ascending Priority (request order on ties), reports
// InsufficientInstanceCapacity for each override in an unavailable pool and
// InvalidLaunchTemplateName.NotFoundException for an unknown template, and
// launches in the first other one. A repeated ClientToken returns the first
// response when the request is identical and IdempotentParameterMismatch
// otherwise. It supports On.CreateFleet.LoseAnswers: the launch happens,
// the answer does not arrive.
func (e *EC2) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	if out, err, ok := e.On.CreateFleet.record(in); ok {
		return out, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if in.Type != ec2types.FleetTypeInstant {
		return nil, e.unsupported("CreateFleet type %q (only instant)", in.Type)
	}
	if in.TargetCapacitySpecification == nil || aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity) != 1 {
		return nil, e.unsupported("CreateFleet total target capacity other than 1")
	}
	token := aws.ToString(in.ClientToken)
	if rec, ok := e.fleets[token]; ok && token != "" {
		if !reflect.DeepEqual(rec.in, in) {
			return nil, APIError("IdempotentParameterMismatch", "client token "+token+" was used with different parameters")
		}
		return rec.out, nil
	}
	capacityType := string(in.TargetCapacitySpecification.DefaultTargetCapacityType)
	lifecycle := ec2types.InstanceLifecycleOnDemand
	if capacityType == "spot" {
		lifecycle = ec2types.InstanceLifecycleSpot
	}
	type option struct {
		lt ec2types.FleetLaunchTemplateSpecification
		ov ec2types.FleetLaunchTemplateOverridesRequest
	}
	var options []option
	for _, cfg := range in.LaunchTemplateConfigs {
		spec := ec2types.FleetLaunchTemplateSpecification{}
		if s := cfg.LaunchTemplateSpecification; s != nil {
			spec = ec2types.FleetLaunchTemplateSpecification{LaunchTemplateId: s.LaunchTemplateId, LaunchTemplateName: s.LaunchTemplateName, Version: s.Version}
		}
		for _, ov := range cfg.Overrides {
			options = append(options, option{lt: spec, ov: ov})
		}
	}
	sort.SliceStable(options, func(i, j int) bool { return priority(options[i].ov) < priority(options[j].ov) })
	out := &ec2.CreateFleetOutput{}
	e.seq++
	out.FleetId = aws.String(fmt.Sprintf("fleet-%08x-0000-0000-0000-%012x", e.seq, e.seq))
	for _, o := range options {
		resp := &ec2types.LaunchTemplateAndOverridesResponse{
			LaunchTemplateSpecification: &o.lt,
			Overrides: &ec2types.FleetLaunchTemplateOverrides{
				InstanceType: o.ov.InstanceType, AvailabilityZone: o.ov.AvailabilityZone, SubnetId: o.ov.SubnetId,
				ImageId: o.ov.ImageId, Priority: o.ov.Priority,
			},
		}
		lt, ok := e.template(o.lt)
		if !ok {
			out.Errors = append(out.Errors, ec2types.CreateFleetError{
				ErrorCode: aws.String("InvalidLaunchTemplateName.NotFoundException"), ErrorMessage: aws.String("launch template not found"),
				LaunchTemplateAndOverrides: resp, Lifecycle: lifecycle,
			})
			continue
		}
		zone := aws.ToString(o.ov.AvailabilityZone)
		if zone == "" {
			zone = e.zoneOf(aws.ToString(o.ov.SubnetId))
		}
		if e.UnavailablePools[Pool{InstanceType: string(o.ov.InstanceType), Zone: zone, CapacityType: capacityType}] {
			out.Errors = append(out.Errors, ec2types.CreateFleetError{
				ErrorCode: aws.String("InsufficientInstanceCapacity"), ErrorMessage: aws.String("We currently do not have sufficient capacity in the Availability Zone you requested."),
				LaunchTemplateAndOverrides: resp, Lifecycle: lifecycle,
			})
			continue
		}
		if len(out.Instances) > 0 {
			continue
		}
		image := aws.ToString(o.ov.ImageId)
		if image == "" && lt.data != nil {
			image = aws.ToString(lt.data.ImageId)
		}
		id := fmt.Sprintf("i-%017x", e.seq)
		inst := ec2types.Instance{
			InstanceId: aws.String(id), InstanceType: o.ov.InstanceType, ImageId: aws.String(image), SubnetId: o.ov.SubnetId,
			Placement:  &ec2types.Placement{AvailabilityZone: aws.String(zone)},
			State:      &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning, Code: aws.Int32(16)},
			LaunchTime: aws.Time(e.Now()), Tags: tagsFor(in.TagSpecifications, ec2types.ResourceTypeInstance),
		}
		if lifecycle == ec2types.InstanceLifecycleSpot {
			inst.InstanceLifecycle = ec2types.InstanceLifecycleTypeSpot
		}
		e.instances = append(e.instances, inst)
		out.Instances = append(out.Instances, ec2types.CreateFleetInstance{
			InstanceIds: []string{id}, InstanceType: o.ov.InstanceType, LaunchTemplateAndOverrides: resp, Lifecycle: lifecycle,
		})
	}
	if token != "" {
		e.fleets[token] = fleetRecord{in: in, out: out}
	}
	if e.On.CreateFleet.answerLost() {
		return nil, ErrAnswerLost
	}
	return out, nil
}

func priority(ov ec2types.FleetLaunchTemplateOverridesRequest) float64 {
	if ov.Priority == nil {
		return 1e18
	}
	return *ov.Priority
}

func (e *EC2) template(spec ec2types.FleetLaunchTemplateSpecification) (launchTemplate, bool) {
	for _, lt := range e.templates {
		if (spec.LaunchTemplateName != nil && lt.name == *spec.LaunchTemplateName) || (spec.LaunchTemplateId != nil && lt.id == *spec.LaunchTemplateId) {
			return lt, true
		}
	}
	return launchTemplate{}, false
}

func (e *EC2) zoneOf(subnetID string) string {
	for _, s := range e.subnets {
		if aws.ToString(s.SubnetId) == subnetID {
			return aws.ToString(s.AvailabilityZone)
		}
	}
	return ""
}

// TerminateInstances terminates the instances. Any unknown ID fails the
// whole call with InvalidInstanceID.NotFound, as EC2 does; terminating a
// terminated instance succeeds.
func (e *EC2) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	if out, err, ok := e.On.TerminateInstances.record(in); ok {
		return out, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var missing []string
	for _, id := range in.InstanceIds {
		if e.instance(id) == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, APIError("InvalidInstanceID.NotFound", fmt.Sprintf("The instance IDs '%s' do not exist", strings.Join(missing, ", ")))
	}
	out := &ec2.TerminateInstancesOutput{}
	for _, id := range in.InstanceIds {
		inst := e.instance(id)
		prev := *inst.State
		inst.State = &ec2types.InstanceState{Name: ec2types.InstanceStateNameTerminated, Code: aws.Int32(48)}
		out.TerminatingInstances = append(out.TerminatingInstances, ec2types.InstanceStateChange{
			InstanceId: aws.String(id), PreviousState: &prev, CurrentState: inst.State,
		})
	}
	return out, nil
}

func (e *EC2) instance(id string) *ec2types.Instance {
	for i := range e.instances {
		if aws.ToString(e.instances[i].InstanceId) == id {
			return &e.instances[i]
		}
	}
	return nil
}

// DescribeInstances supports InstanceIds (an unknown ID fails with
// InvalidInstanceID.NotFound), the filters instance-id, instance-state-name,
// tag:<key> and tag-key, and pagination by PageSize. Each instance is its
// own reservation.
func (e *EC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	if out, err, ok := e.On.DescribeInstances.record(in); ok {
		return out, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range in.InstanceIds {
		if e.instance(id) == nil {
			return nil, APIError("InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id))
		}
	}
	var matched []ec2types.Instance
	for _, inst := range e.instances {
		if len(in.InstanceIds) > 0 && !slices.Contains(in.InstanceIds, aws.ToString(inst.InstanceId)) {
			continue
		}
		ok, err := e.match(in.Filters, inst.Tags, func(name string) (string, bool) {
			switch name {
			case "instance-id":
				return aws.ToString(inst.InstanceId), true
			case "instance-state-name":
				return string(inst.State.Name), true
			}
			return "", false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			matched = append(matched, inst)
		}
	}
	start := 0
	if tok := aws.ToString(in.NextToken); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(matched) {
			return nil, APIError("InvalidPaginationToken", "bad token "+tok)
		}
		start = n
	}
	end := len(matched)
	if e.PageSize > 0 && start+e.PageSize < end {
		end = start + e.PageSize
	}
	out := &ec2.DescribeInstancesOutput{}
	for _, inst := range matched[start:end] {
		out.Reservations = append(out.Reservations, ec2types.Reservation{Instances: []ec2types.Instance{inst}})
	}
	if end < len(matched) {
		out.NextToken = aws.String(strconv.Itoa(end))
	}
	return out, nil
}

// DescribeSubnets supports SubnetIds and the filters subnet-id,
// availability-zone, tag:<key> and tag-key.
func (e *EC2) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	if out, err, ok := e.On.DescribeSubnets.record(in); ok {
		return out, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := &ec2.DescribeSubnetsOutput{}
	for _, id := range in.SubnetIds {
		if !slices.ContainsFunc(e.subnets, func(s ec2types.Subnet) bool { return aws.ToString(s.SubnetId) == id }) {
			return nil, APIError("InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", id))
		}
	}
	for _, s := range e.subnets {
		if len(in.SubnetIds) > 0 && !slices.Contains(in.SubnetIds, aws.ToString(s.SubnetId)) {
			continue
		}
		ok, err := e.match(in.Filters, s.Tags, func(name string) (string, bool) {
			switch name {
			case "subnet-id":
				return aws.ToString(s.SubnetId), true
			case "availability-zone":
				return aws.ToString(s.AvailabilityZone), true
			}
			return "", false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out.Subnets = append(out.Subnets, s)
		}
	}
	return out, nil
}

// DescribeCapacityReservations answers what On.DescribeCapacityReservations
// scripts, else no reservations.
func (e *EC2) DescribeCapacityReservations(_ context.Context, in *ec2.DescribeCapacityReservationsInput, _ ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error) {
	if out, err, ok := e.On.DescribeCapacityReservations.record(in); ok {
		return out, err
	}
	return &ec2.DescribeCapacityReservationsOutput{}, nil
}

// DescribePlacementGroups supports GroupIds and GroupNames (either naming
// a group that does not exist fails the call with
// InvalidPlacementGroup.Unknown, whatever its filters, as EC2 does) and the
// filters group-name, state, strategy, tag:<key> and tag-key. Like EC2's
// it does not page: every match comes in one answer, with no NextToken.
func (e *EC2) DescribePlacementGroups(_ context.Context, in *ec2.DescribePlacementGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error) {
	if out, err, ok := e.On.DescribePlacementGroups.record(in); ok {
		return out, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, want := range append(slices.Clone(in.GroupIds), in.GroupNames...) {
		if !slices.ContainsFunc(e.pgroups, func(g ec2types.PlacementGroup) bool {
			return aws.ToString(g.GroupId) == want || aws.ToString(g.GroupName) == want
		}) {
			return nil, APIError("InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", want))
		}
	}
	out := &ec2.DescribePlacementGroupsOutput{}
	for _, g := range e.pgroups {
		if len(in.GroupIds) > 0 && !slices.Contains(in.GroupIds, aws.ToString(g.GroupId)) ||
			len(in.GroupNames) > 0 && !slices.Contains(in.GroupNames, aws.ToString(g.GroupName)) {
			continue
		}
		ok, err := e.match(in.Filters, g.Tags, func(name string) (string, bool) {
			switch name {
			case "group-name":
				return aws.ToString(g.GroupName), true
			case "state":
				return string(g.State), true
			case "strategy":
				return string(g.Strategy), true
			}
			return "", false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out.PlacementGroups = append(out.PlacementGroups, g)
		}
	}
	return out, nil
}

// DescribeSecurityGroups supports GroupIds and the filters group-id,
// group-name, tag:<key> and tag-key.
func (e *EC2) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	if out, err, ok := e.On.DescribeSecurityGroups.record(in); ok {
		return out, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := &ec2.DescribeSecurityGroupsOutput{}
	for _, g := range e.groups {
		if len(in.GroupIds) > 0 && !slices.Contains(in.GroupIds, aws.ToString(g.GroupId)) {
			continue
		}
		ok, err := e.match(in.Filters, g.Tags, func(name string) (string, bool) {
			switch name {
			case "group-id":
				return aws.ToString(g.GroupId), true
			case "group-name":
				return aws.ToString(g.GroupName), true
			}
			return "", false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out.SecurityGroups = append(out.SecurityGroups, g)
		}
	}
	return out, nil
}

// DescribeImages supports ImageIds, Owners (an account ID, "self" for
// account "000000000000", or an owner alias such as "amazon"),
// IncludeDeprecated (images whose DeprecationTime has passed are hidden
// unless true) and the filters image-id, name (with * and ? wildcards),
// architecture, state, tag:<key> and tag-key.
func (e *EC2) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	if out, err, ok := e.On.DescribeImages.record(in); ok {
		return out, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.Now()
	out := &ec2.DescribeImagesOutput{}
	for _, img := range e.images {
		if len(in.ImageIds) > 0 && !slices.Contains(in.ImageIds, aws.ToString(img.ImageId)) {
			continue
		}
		if len(in.Owners) > 0 && !slices.ContainsFunc(in.Owners, func(o string) bool {
			return o == aws.ToString(img.OwnerId) || o == aws.ToString(img.ImageOwnerAlias) || (o == "self" && aws.ToString(img.OwnerId) == "000000000000")
		}) {
			continue
		}
		if !aws.ToBool(in.IncludeDeprecated) && img.DeprecationTime != nil {
			if t, err := time.Parse(time.RFC3339, *img.DeprecationTime); err == nil && !t.After(now) {
				continue
			}
		}
		ok, err := e.match(in.Filters, img.Tags, func(name string) (string, bool) {
			switch name {
			case "image-id":
				return aws.ToString(img.ImageId), true
			case "name":
				return aws.ToString(img.Name), true
			case "architecture":
				return string(img.Architecture), true
			case "state":
				return string(img.State), true
			}
			return "", false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out.Images = append(out.Images, img)
		}
	}
	return out, nil
}

// DescribeLaunchTemplates supports LaunchTemplateNames (an unknown name
// fails with InvalidLaunchTemplateName.NotFoundException, as EC2 does) and
// the filters launch-template-name, tag:<key> and tag-key.
func (e *EC2) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	if out, err, ok := e.On.DescribeLaunchTemplates.record(in); ok {
		return out, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range in.LaunchTemplateNames {
		if _, ok := e.template(ec2types.FleetLaunchTemplateSpecification{LaunchTemplateName: aws.String(name)}); !ok {
			return nil, APIError("InvalidLaunchTemplateName.NotFoundException", fmt.Sprintf("At least one of the launch templates specified in the request does not exist: %s", name))
		}
	}
	out := &ec2.DescribeLaunchTemplatesOutput{}
	for _, lt := range e.templates {
		if len(in.LaunchTemplateNames) > 0 && !slices.Contains(in.LaunchTemplateNames, lt.name) {
			continue
		}
		ok, err := e.match(in.Filters, lt.tags, func(name string) (string, bool) {
			if name == "launch-template-name" {
				return lt.name, true
			}
			return "", false
		})
		if err != nil {
			return nil, err
		}
		if ok {
			out.LaunchTemplates = append(out.LaunchTemplates, ec2types.LaunchTemplate{
				LaunchTemplateId: aws.String(lt.id), LaunchTemplateName: aws.String(lt.name), Tags: slices.Clone(lt.tags),
				DefaultVersionNumber: aws.Int64(1), LatestVersionNumber: aws.Int64(1),
			})
		}
	}
	return out, nil
}

// CreateLaunchTemplate stores a launch template. A taken name fails with
// InvalidLaunchTemplateName.AlreadyExistsException, unless the request
// repeats the ClientToken that created it.
func (e *EC2) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	if out, err, ok := e.On.CreateLaunchTemplate.record(in); ok {
		return out, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	name := aws.ToString(in.LaunchTemplateName)
	if name == "" || in.LaunchTemplateData == nil {
		return nil, APIError("MissingParameter", "LaunchTemplateName and LaunchTemplateData are required")
	}
	if lt, ok := e.template(ec2types.FleetLaunchTemplateSpecification{LaunchTemplateName: aws.String(name)}); ok {
		if tok := aws.ToString(in.ClientToken); tok != "" && e.ltTokens[tok] == name {
			return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{LaunchTemplateId: aws.String(lt.id), LaunchTemplateName: aws.String(name)}}, nil
		}
		return nil, APIError("InvalidLaunchTemplateName.AlreadyExistsException", fmt.Sprintf("Launch template name already in use: %s", name))
	}
	e.seq++
	lt := launchTemplate{id: fmt.Sprintf("lt-%017x", e.seq), name: name, data: in.LaunchTemplateData, tags: tagsFor(in.TagSpecifications, ec2types.ResourceTypeLaunchTemplate)}
	e.templates = append(e.templates, lt)
	if tok := aws.ToString(in.ClientToken); tok != "" {
		e.ltTokens[tok] = name
	}
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{
		LaunchTemplateId: aws.String(lt.id), LaunchTemplateName: aws.String(name), Tags: slices.Clone(lt.tags),
		DefaultVersionNumber: aws.Int64(1), LatestVersionNumber: aws.Int64(1),
	}}, nil
}

// match applies EC2 filters: values of one filter are ORed, filters ANDed;
// tag:<key> and tag-key read tags, field resolves the rest. An unknown
// filter name fails the test.
func (e *EC2) match(filters []ec2types.Filter, tags []ec2types.Tag, field func(string) (string, bool)) (bool, error) {
	for _, f := range filters {
		name := aws.ToString(f.Name)
		var have []string
		switch {
		case strings.HasPrefix(name, "tag:"):
			key := strings.TrimPrefix(name, "tag:")
			for _, t := range tags {
				if aws.ToString(t.Key) == key {
					have = append(have, aws.ToString(t.Value))
				}
			}
		case name == "tag-key":
			for _, t := range tags {
				have = append(have, aws.ToString(t.Key))
			}
		default:
			v, ok := field(name)
			if !ok {
				return false, e.unsupported("filter %q", name)
			}
			have = []string{v}
		}
		if !slices.ContainsFunc(f.Values, func(want string) bool {
			return slices.ContainsFunc(have, func(h string) bool { return glob(want, h) })
		}) {
			return false, nil
		}
	}
	return true, nil
}

// glob matches s against pattern with EC2's wildcards: * (any run) and ?
// (one character).
func glob(pattern, s string) bool {
	if pattern == "" {
		return s == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if glob(pattern[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && glob(pattern[1:], s[1:])
	}
	return s != "" && s[0] == pattern[0] && glob(pattern[1:], s[1:])
}

func tagList(tags map[string]string) []ec2types.Tag {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ec2types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

func tagsFor(specs []ec2types.TagSpecification, rt ec2types.ResourceType) []ec2types.Tag {
	var out []ec2types.Tag
	for _, s := range specs {
		if s.ResourceType == rt {
			out = append(out, s.Tags...)
		}
	}
	return out
}
