package ec2sim

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Instance states and their codes (EC2 InstanceState).
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
)

var stateCodes = map[string]int{StatePending: 0, StateRunning: 16, StateShuttingDown: 32, StateTerminated: 48}

// State reasons EC2 reports (StateReason.Code).
const (
	ReasonUserShutdown = "Client.UserInitiatedShutdown"
	ReasonSpotReclaim  = "Server.SpotInstanceTermination"
	ReasonInternal     = "Server.InternalError"
)

var reasonMessages = map[string]string{
	ReasonUserShutdown: "Client.UserInitiatedShutdown: User initiated shutdown",
	ReasonSpotReclaim:  "Server.SpotInstanceTermination: Spot instance termination",
	ReasonInternal:     "Server.InternalError: Internal error on launch",
}

// instance is a launched instance.
type instance struct {
	id, instanceType, zone, zoneID, subnetID, vpcID string
	privateIP, privateDNS, imageID, arch, platform  string
	hypervisor                                      string
	capacityType, spotRequestID                     string
	launchTime, runningAt                           time.Time
	state, reason                                   string
	terminateAt, terminatedAt                       time.Time
	tags                                            map[string]string
	userData                                        string // base64, as the launch template holds it
	ltID, ltName, ltVersion                         string
	fleetID, reservationID, clientToken             string
	groups                                          []string
	iamProfile                                      string
	volumes                                         []*volume
	metadata                                        map[string]string
	interruption                                    *SpotInterruption
	// tenancy is the launch template's Placement.Tenancy: default or
	// dedicated.
	tenancy string
	// placementGroupID/Name and partition: the placement group it launched
	// into and its partition (partition groups only; else 0).
	placementGroupID, placementGroupName string
	partition                            int
	// capacityReservationID is the capacity reservation (cr-...) the
	// instance runs in, "" for none.
	capacityReservationID string
	capacityBlock         bool // runs in a capacity block
	// crPreference and crTarget are the launch template's
	// CapacityReservationSpecification at launch.
	crPreference, crTarget string
}

// volume is an EBS volume attached at launch.
type volume struct {
	id, device, volumeType  string
	sizeGiB                 int
	encrypted, deleteOnTerm bool
	tags                    map[string]string
}

// Instance is a snapshot of a launched instance.
type Instance struct {
	ID             string `json:"id"`
	InstanceType   string `json:"instanceType"`
	Zone           string `json:"zone"`
	ZoneID         string `json:"zoneId"`
	SubnetID       string `json:"subnetId"`
	VPCID          string `json:"vpcId"`
	PrivateIP      string `json:"privateIp"`
	PrivateDNSName string `json:"privateDnsName"`
	ImageID        string `json:"imageId"`
	// Architecture is "x86_64" or "arm64".
	Architecture string `json:"architecture"`
	// Platform is "windows" for Windows images, else "".
	Platform string `json:"platform"`
	// CapacityType is "spot" or "on-demand".
	CapacityType string `json:"capacityType"`
	// CapacityReservationID is the capacity reservation the instance runs
	// in ("" for none).
	CapacityReservationID string `json:"capacityReservationId,omitempty"`
	// State is pending, running, shutting-down or terminated.
	State string `json:"state"`
	// StateReason is the StateReason code once the instance is terminating
	// (e.g. Client.UserInitiatedShutdown), else "".
	StateReason string            `json:"stateReason"`
	LaunchTime  time.Time         `json:"launchTime"`
	Tags        map[string]string `json:"tags"`
	// UserData is the decoded user data of the launch template.
	UserData              []byte   `json:"userData"`
	LaunchTemplateID      string   `json:"launchTemplateId"`
	LaunchTemplateName    string   `json:"launchTemplateName"`
	LaunchTemplateVersion string   `json:"launchTemplateVersion"`
	FleetID               string   `json:"fleetId"`
	SecurityGroupIDs      []string `json:"securityGroupIds"`
	// IAMInstanceProfile is the instance profile ARN, or "".
	IAMInstanceProfile string   `json:"iamInstanceProfile"`
	Volumes            []Volume `json:"volumes"`
	// MetadataOptions holds the launch template's MetadataOptions
	// (HttpTokens, HttpPutResponseHopLimit, ...).
	MetadataOptions map[string]string `json:"metadataOptions"`
	// Interruption is set once a Spot interruption warning was issued.
	Interruption *SpotInterruption `json:"interruption"`
	// Tenancy is Placement.Tenancy: "default" or "dedicated" (from the
	// launch template).
	Tenancy string `json:"tenancy"`
	// PlacementGroupID, PlacementGroupName and PartitionNumber are its
	// placement group ("" when none) and partition (0 unless a partition
	// group).
	PlacementGroupID   string `json:"placementGroupId"`
	PlacementGroupName string `json:"placementGroupName"`
	PartitionNumber    int    `json:"partitionNumber"`
}

// Volume is an EBS volume created with an instance.
type Volume struct {
	ID                  string            `json:"id"`
	DeviceName          string            `json:"deviceName"`
	VolumeType          string            `json:"volumeType"`
	SizeGiB             int               `json:"sizeGiB"`
	Encrypted           bool              `json:"encrypted"`
	DeleteOnTermination bool              `json:"deleteOnTermination"`
	Tags                map[string]string `json:"tags"`
}

// SpotInterruption is a Spot interruption warning: EC2 reclaims the
// instance SpotReclaimDelay after WarningTime.
type SpotInterruption struct {
	InstanceID   string    `json:"instanceId"`
	InstanceType string    `json:"instanceType"`
	Zone         string    `json:"zone"`
	WarningTime  time.Time `json:"warningTime"`
	ReclaimTime  time.Time `json:"reclaimTime"`
	// Action is "terminate", as in the EC2 Spot Instance Interruption
	// Warning event's instance-action.
	Action string `json:"action"`
}

func (in *instance) snapshot() Instance {
	ud, err := base64.StdEncoding.DecodeString(in.userData)
	if err != nil {
		ud = []byte(in.userData)
	}
	out := Instance{
		ID: in.id, InstanceType: in.instanceType, Zone: in.zone, ZoneID: in.zoneID, SubnetID: in.subnetID, VPCID: in.vpcID,
		PrivateIP: in.privateIP, PrivateDNSName: in.privateDNS, ImageID: in.imageID, Architecture: in.arch, Platform: in.platform,
		CapacityType: in.capacityType, State: in.state, StateReason: in.reason, LaunchTime: in.launchTime,
		Tags: maps.Clone(in.tags), UserData: ud, LaunchTemplateID: in.ltID, LaunchTemplateName: in.ltName,
		LaunchTemplateVersion: in.ltVersion, FleetID: in.fleetID, SecurityGroupIDs: slices.Clone(in.groups),
		IAMInstanceProfile: in.iamProfile, MetadataOptions: maps.Clone(in.metadata), Tenancy: cmp.Or(in.tenancy, "default"),
		PlacementGroupID: in.placementGroupID, PlacementGroupName: in.placementGroupName, PartitionNumber: in.partition, CapacityReservationID: in.capacityReservationID,
	}
	if len(ud) == 0 {
		out.UserData = nil
	}
	for _, v := range in.volumes {
		out.Volumes = append(out.Volumes, Volume{ID: v.id, DeviceName: v.device, VolumeType: v.volumeType, SizeGiB: v.sizeGiB,
			Encrypted: v.encrypted, DeleteOnTermination: v.deleteOnTerm, Tags: maps.Clone(v.tags)})
	}
	if in.interruption != nil {
		c := *in.interruption
		out.Interruption = &c
	}
	return out
}

// advance applies every state change due by now: pending instances whose
// boot delay has passed start running, Spot instances whose reclaim time
// has come start shutting down, shutting-down instances whose shutdown
// delay has passed are terminated (their addresses return to the subnet),
// and terminated instances older than TerminatedVisibility disappear.
func (s *Server) advance(now time.Time) {
	for _, id := range s.order {
		in := s.instances[id]
		if in == nil {
			continue
		}
		if in.state == StatePending && !now.Before(in.runningAt) {
			s.setState(in, StateRunning, in.runningAt)
		}
		if iv := in.interruption; iv != nil && (in.state == StatePending || in.state == StateRunning) && !now.Before(iv.ReclaimTime) {
			s.beginShutdown(in, iv.ReclaimTime, ReasonSpotReclaim)
		}
		if in.state == StateShuttingDown && !now.Before(in.terminateAt) {
			s.finishTermination(in, in.terminateAt)
		}
	}
	s.order = slices.DeleteFunc(s.order, func(id string) bool {
		in := s.instances[id]
		if in.state == StateTerminated && !now.Before(in.terminatedAt.Add(TerminatedVisibility)) {
			delete(s.instances, id)
			return true
		}
		return false
	})
}

func (s *Server) beginShutdown(in *instance, at time.Time, reason string) {
	in.reason = reason
	s.setState(in, StateShuttingDown, at)
	in.terminateAt = at.Add(s.shutdown)
}

func (s *Server) finishTermination(in *instance, at time.Time) {
	in.terminatedAt = at
	s.setState(in, StateTerminated, at)
	if sn := s.subnetByID(in.subnetID); sn != nil {
		sn.releaseIP(in.privateIP)
	}
	s.releaseReservation(in)
}

// Instance returns a snapshot of one instance; ok is false when EC2 would
// no longer describe it.
func (s *Server) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.unlock()
	s.advance(s.clock.Now())
	in, ok := s.instances[id]
	if !ok {
		return Instance{}, false
	}
	return in.snapshot(), true
}

// Instances returns every instance EC2 would still describe (terminated
// ones for TerminatedVisibility), in launch order.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.unlock()
	s.advance(s.clock.Now())
	out := make([]Instance, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.instances[id].snapshot())
	}
	return out
}

// SetBootDelay changes how long instances launched from now on stay
// pending.
func (s *Server) SetBootDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bootDelay = max(d, 0)
}

// FailInstance makes a pending or running instance fail: it is terminated
// at once with state reason Server.InternalError, as EC2 reports an
// instance that could not start. It fails for an unknown or already
// terminating instance.
func (s *Server) FailInstance(id string) error {
	s.mu.Lock()
	defer s.unlock()
	now := s.clock.Now()
	s.advance(now)
	in, ok := s.instances[id]
	if !ok {
		return fmt.Errorf("instance %s: not found", id)
	}
	if in.state != StatePending && in.state != StateRunning {
		return fmt.Errorf("instance %s: %s, not pending or running", id, in.state)
	}
	in.reason = ReasonInternal
	s.setState(in, StateShuttingDown, now)
	s.finishTermination(in, now)
	return nil
}

// InterruptSpot issues a Spot interruption warning for a pending or running
// Spot instance: the warning is recorded (see SpotInterruptions) and the
// instance is reclaimed SpotReclaimDelay later on the simulator clock. A
// second call returns the first warning. It fails for an unknown,
// on-demand or terminating instance.
func (s *Server) InterruptSpot(id string) (SpotInterruption, error) {
	s.mu.Lock()
	defer s.unlock()
	now := s.clock.Now()
	s.advance(now)
	in, ok := s.instances[id]
	if !ok {
		return SpotInterruption{}, fmt.Errorf("instance %s: not found", id)
	}
	if in.capacityType != "spot" {
		return SpotInterruption{}, fmt.Errorf("instance %s: %s, not spot", id, in.capacityType)
	}
	if in.interruption != nil {
		return *in.interruption, nil
	}
	if in.state != StatePending && in.state != StateRunning {
		return SpotInterruption{}, fmt.Errorf("instance %s: %s, not pending or running", id, in.state)
	}
	iv := SpotInterruption{InstanceID: id, InstanceType: in.instanceType, Zone: in.zone, WarningTime: now,
		ReclaimTime: now.Add(SpotReclaimDelay), Action: "terminate"}
	in.interruption = &iv
	s.notices = append(s.notices, iv)
	s.emit(DetailTypeSpotInterruptionWarning, id, now, map[string]string{"instance-action": iv.Action})
	return iv, nil
}

// SpotInterruptions returns every interruption warning issued, oldest
// first.
func (s *Server) SpotInterruptions() []SpotInterruption {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.notices)
}

// validInstanceID reports whether id looks like an instance ID.
func validInstanceID(id string) bool {
	rest, ok := strings.CutPrefix(id, "i-")
	if !ok || (len(rest) != 8 && len(rest) != 17) {
		return false
	}
	for _, c := range rest {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// checkInstanceIDs applies EC2's ID checks: a malformed ID fails with
// InvalidInstanceID.Malformed, unknown ones with InvalidInstanceID.NotFound
// (the whole call fails).
func (s *Server) checkInstanceIDs(ids []string) error {
	for _, id := range ids {
		if !validInstanceID(id) {
			return errorf("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
	}
	var missing []string
	for _, id := range ids {
		if _, ok := s.instances[id]; !ok {
			missing = append(missing, id)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	}
	return errorf("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
}

type stateXML struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

func stateOf(name string) stateXML { return stateXML{Code: stateCodes[name], Name: name} }

type stateReasonXML struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type placementXML struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId,omitempty"`
	GroupName          string `xml:"groupName"`
	GroupID            string `xml:"groupId,omitempty"`
	PartitionNumber    int    `xml:"partitionNumber,omitempty"`
	Tenancy            string `xml:"tenancy"`
}

type groupXML struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type instanceEbsXML struct {
	VolumeID            string `xml:"volumeId"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type instanceBlockDeviceXML struct {
	DeviceName string         `xml:"deviceName"`
	Ebs        instanceEbsXML `xml:"ebs"`
}

type iamProfileXML struct {
	Arn string `xml:"arn"`
	ID  string `xml:"id"`
}

type metadataOptionsXML struct {
	State                   string `xml:"state"`
	HTTPTokens              string `xml:"httpTokens"`
	HTTPPutResponseHopLimit int    `xml:"httpPutResponseHopLimit"`
	HTTPEndpoint            string `xml:"httpEndpoint"`
	HTTPProtocolIpv6        string `xml:"httpProtocolIpv6"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags"`
}

type instanceXML struct {
	InstanceID            string                   `xml:"instanceId"`
	ImageID               string                   `xml:"imageId"`
	InstanceState         stateXML                 `xml:"instanceState"`
	PrivateDNSName        string                   `xml:"privateDnsName"`
	DNSName               string                   `xml:"dnsName"`
	Reason                string                   `xml:"reason"`
	AmiLaunchIndex        int                      `xml:"amiLaunchIndex"`
	InstanceType          string                   `xml:"instanceType"`
	LaunchTime            string                   `xml:"launchTime"`
	Placement             placementXML             `xml:"placement"`
	Platform              string                   `xml:"platform,omitempty"`
	Monitoring            string                   `xml:"monitoring>state"`
	SubnetID              string                   `xml:"subnetId"`
	VpcID                 string                   `xml:"vpcId"`
	PrivateIPAddress      string                   `xml:"privateIpAddress"`
	SourceDestCheck       bool                     `xml:"sourceDestCheck"`
	GroupSet              []groupXML               `xml:"groupSet>item"`
	StateReason           *stateReasonXML          `xml:"stateReason,omitempty"`
	Architecture          string                   `xml:"architecture"`
	RootDeviceType        string                   `xml:"rootDeviceType"`
	RootDeviceName        string                   `xml:"rootDeviceName"`
	BlockDeviceMapping    []instanceBlockDeviceXML `xml:"blockDeviceMapping>item"`
	InstanceLifecycle     string                   `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string                   `xml:"spotInstanceRequestId,omitempty"`
	VirtualizationType    string                   `xml:"virtualizationType"`
	ClientToken           string                   `xml:"clientToken"`
	TagSet                []tagXML                 `xml:"tagSet>item,omitempty"`
	Hypervisor            string                   `xml:"hypervisor"`
	IamInstanceProfile    *iamProfileXML           `xml:"iamInstanceProfile,omitempty"`
	EbsOptimized          bool                     `xml:"ebsOptimized"`
	EnaSupport            bool                     `xml:"enaSupport"`
	MetadataOptions       metadataOptionsXML       `xml:"metadataOptions"`
	PlatformDetails       string                   `xml:"platformDetails"`
	UsageOperation        string                   `xml:"usageOperation"`
	CapacityReservationID string                   `xml:"capacityReservationId,omitempty"`
	CapacityReservationSp *crSpecificationXML      `xml:"capacityReservationSpecification,omitempty"`
}

// crSpecificationXML is an instance's capacityReservationSpecification.
type crSpecificationXML struct {
	Preference string `xml:"capacityReservationPreference,omitempty"`
	TargetID   string `xml:"capacityReservationTarget>capacityReservationId,omitempty"`
}

func (s *Server) instanceXML(in *instance) instanceXML {
	x := instanceXML{
		InstanceID: in.id, ImageID: in.imageID, InstanceState: stateOf(in.state), InstanceType: in.instanceType,
		LaunchTime: timestamp(in.launchTime),
		Placement: placementXML{AvailabilityZone: in.zone, AvailabilityZoneID: in.zoneID, Tenancy: cmp.Or(in.tenancy, "default"),
			GroupName: in.placementGroupName, GroupID: in.placementGroupID, PartitionNumber: in.partition},
		Platform: in.platform, Monitoring: "disabled", SubnetID: in.subnetID, VpcID: in.vpcID,
		SourceDestCheck: true, Architecture: in.arch, RootDeviceType: "ebs", RootDeviceName: "/dev/xvda",
		VirtualizationType: "hvm", ClientToken: in.clientToken, TagSet: tagSet(in.tags), Hypervisor: in.hypervisor,
		EbsOptimized: true, EnaSupport: true, PlatformDetails: "Linux/UNIX", UsageOperation: "RunInstances",
		MetadataOptions: metadataOptionsXML{State: "applied", HTTPTokens: "required", HTTPPutResponseHopLimit: 1,
			HTTPEndpoint: "enabled", HTTPProtocolIpv6: "disabled", InstanceMetadataTags: "disabled"},
	}
	if in.platform == "windows" {
		x.RootDeviceName, x.PlatformDetails, x.UsageOperation = "/dev/sda1", "Windows", "RunInstances:0002"
	}
	if in.state != StateTerminated {
		x.PrivateDNSName, x.PrivateIPAddress = in.privateDNS, in.privateIP
		for _, g := range in.groups {
			name := g
			if sg := s.groupByID(g); sg != nil {
				name = sg.name
			}
			x.GroupSet = append(x.GroupSet, groupXML{GroupID: g, GroupName: name})
		}
		for _, v := range in.volumes {
			x.BlockDeviceMapping = append(x.BlockDeviceMapping, instanceBlockDeviceXML{DeviceName: v.device,
				Ebs: instanceEbsXML{VolumeID: v.id, Status: "attached", AttachTime: timestamp(in.launchTime), DeleteOnTermination: v.deleteOnTerm}})
		}
	} else {
		x.SubnetID, x.VpcID = "", ""
	}
	if in.reason != "" {
		x.StateReason = &stateReasonXML{Code: in.reason, Message: reasonMessages[in.reason]}
		if in.reason == ReasonUserShutdown {
			x.Reason = "User initiated (" + in.terminateAt.Add(-s.shutdown).UTC().Format("2006-01-02 15:04:05 MST") + ")"
		}
	}
	if in.capacityType == "spot" {
		x.InstanceLifecycle, x.SpotInstanceRequestID = "spot", in.spotRequestID
	}
	if in.capacityBlock {
		x.InstanceLifecycle = "capacity-block"
	}
	x.CapacityReservationID = in.capacityReservationID
	x.CapacityReservationSp = &crSpecificationXML{Preference: cmp.Or(in.crPreference, "open"), TargetID: in.crTarget}
	if in.iamProfile != "" {
		x.IamInstanceProfile = &iamProfileXML{Arn: in.iamProfile, ID: "AIPA" + strings.ToUpper(hashHex("profile/"+in.iamProfile, 17))}
	}
	m := in.metadata
	if v := m["HttpTokens"]; v != "" {
		x.MetadataOptions.HTTPTokens = v
	}
	if v, err := strconv.Atoi(m["HttpPutResponseHopLimit"]); err == nil {
		x.MetadataOptions.HTTPPutResponseHopLimit = v
	}
	if v := m["HttpEndpoint"]; v != "" {
		x.MetadataOptions.HTTPEndpoint = v
	}
	if v := m["HttpProtocolIpv6"]; v != "" {
		x.MetadataOptions.HTTPProtocolIpv6 = v
	}
	if v := m["InstanceMetadataTags"]; v != "" {
		x.MetadataOptions.InstanceMetadataTags = v
	}
	return x
}

type reservationXML struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	GroupSet      []groupXML    `xml:"groupSet>item"`
	Instances     []instanceXML `xml:"instancesSet>item"`
}

type describeInstancesResponse struct {
	respHeader
	Reservations []reservationXML `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

// describeInstances follows EC2 DescribeInstances: InstanceId.N (checked as
// TerminateInstances does), filters, and MaxResults/NextToken pagination
// counted in instances (EC2 refuses MaxResults together with instance
// IDs). Instances are grouped into their launch reservations.
func (s *Server) describeInstances(q *qnode, _ time.Time) (response, error) {
	filters, err := parseFilters(q, []string{"instance-id", "instance-state-name", "instance-state-code", "instance-type",
		"availability-zone", "subnet-id", "vpc-id", "image-id", "private-ip-address", "private-dns-name",
		"instance-lifecycle", "reservation-id", "architecture", "client-token"}, true)
	if err != nil {
		return nil, err
	}
	ids := q.strs("InstanceId")
	if len(ids) > 0 && q.has("MaxResults") {
		return nil, errorf("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	if err := s.checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	var hits []*instance
	for _, id := range s.order {
		in := s.instances[id]
		if len(ids) > 0 && !slices.Contains(ids, id) {
			continue
		}
		field := func(name string) []string {
			switch name {
			case "instance-id":
				return []string{in.id}
			case "instance-state-name":
				return []string{in.state}
			case "instance-state-code":
				return []string{strconv.Itoa(stateCodes[in.state])}
			case "instance-type":
				return []string{in.instanceType}
			case "availability-zone":
				return []string{in.zone}
			case "subnet-id":
				return []string{in.subnetID}
			case "vpc-id":
				return []string{in.vpcID}
			case "image-id":
				return []string{in.imageID}
			case "private-ip-address":
				return []string{in.privateIP}
			case "private-dns-name":
				return []string{in.privateDNS}
			case "instance-lifecycle":
				if in.capacityType == "spot" {
					return []string{"spot"}
				}
				return nil
			case "reservation-id":
				return []string{in.reservationID}
			case "architecture":
				return []string{in.arch}
			case "client-token":
				return []string{in.clientToken}
			}
			return nil
		}
		if matches(filters, in.tags, field) {
			hits = append(hits, in)
		}
	}
	p, err := paginate(q, "DescribeInstances", len(hits), 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	resp := &describeInstancesResponse{NextToken: p.next}
	for _, in := range hits[p.start:p.end] {
		n := len(resp.Reservations)
		if n == 0 || resp.Reservations[n-1].ReservationID != in.reservationID {
			resp.Reservations = append(resp.Reservations, reservationXML{ReservationID: in.reservationID, OwnerID: s.accountID})
			n++
		}
		resp.Reservations[n-1].Instances = append(resp.Reservations[n-1].Instances, s.instanceXML(in))
	}
	return resp, nil
}

type stateChangeXML struct {
	InstanceID    string   `xml:"instanceId"`
	CurrentState  stateXML `xml:"currentState"`
	PreviousState stateXML `xml:"previousState"`
}

type terminateInstancesResponse struct {
	respHeader
	Instances []stateChangeXML `xml:"instancesSet>item"`
}

// terminateInstances follows EC2 TerminateInstances: every ID must exist
// (else nothing happens and the call fails), pending and running instances
// move to shutting-down (terminated after Options.ShutdownDelay), and
// instances already shutting down or terminated are reported unchanged,
// which makes the call idempotent.
func (s *Server) terminateInstances(q *qnode, now time.Time) (response, error) {
	ids := q.strs("InstanceId")
	if len(ids) == 0 {
		return nil, missingParameter("InstanceId")
	}
	if err := s.checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	resp := &terminateInstancesResponse{}
	for _, id := range ids {
		in := s.instances[id]
		prev := in.state
		if in.state == StatePending || in.state == StateRunning {
			s.beginShutdown(in, now, ReasonUserShutdown)
		}
		resp.Instances = append(resp.Instances, stateChangeXML{InstanceID: id, CurrentState: stateOf(in.state), PreviousState: stateOf(prev)})
	}
	return resp, nil
}

type returnResponse struct {
	respHeader
	Return bool `xml:"return"`
}

// createTags follows EC2 CreateTags for the resources the simulator holds:
// instances (i-), their volumes (vol-), launch templates (lt-), subnets,
// security groups, images and fleets. The call is all-or-nothing: an
// unknown resource or an invalid tag fails it.
func (s *Server) createTags(q *qnode, _ time.Time) (response, error) {
	ids := q.strs("ResourceId")
	tags := tagList(q.list("Tag"))
	if len(ids) == 0 {
		return nil, missingParameter("ResourceId")
	}
	if len(tags) == 0 {
		return nil, missingParameter("Tag")
	}
	targets := make([]map[string]string, 0, len(ids))
	for _, id := range ids {
		m, err := s.tagsOf(id)
		if err != nil {
			return nil, err
		}
		if err := validateTags(tags, m); err != nil {
			return nil, err
		}
		targets = append(targets, m)
	}
	for _, m := range targets {
		for _, t := range tags {
			m[t.Key] = t.Value
		}
	}
	return &returnResponse{Return: true}, nil
}

// tagsOf returns the live tag map of a resource ID.
func (s *Server) tagsOf(id string) (map[string]string, error) {
	prefix, _, _ := strings.Cut(id, "-")
	switch prefix {
	case "i":
		if in, ok := s.instances[id]; ok {
			return in.tags, nil
		}
		return nil, errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	case "vol":
		for _, in := range s.instances {
			for _, v := range in.volumes {
				if v.id == id {
					return v.tags, nil
				}
			}
		}
		return nil, errorf("InvalidVolume.NotFound", "The volume '%s' does not exist.", id)
	case "lt":
		if lt, ok := s.templates[id]; ok {
			return lt.tags, nil
		}
		return nil, errorf("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
	case "subnet":
		if sn := s.subnetByID(id); sn != nil {
			return sn.tags, nil
		}
		return nil, errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
	case "sg":
		if g := s.groupByID(id); g != nil {
			return g.tags, nil
		}
		return nil, errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	case "ami":
		if img := s.imageByID(id); img != nil {
			return img.Tags, nil
		}
		return nil, errorf("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
	case "fleet":
		if f, ok := s.fleets[id]; ok {
			return f.tags, nil
		}
		return nil, errorf("InvalidFleetId.NotFound", "The fleet ID '%s' does not exist", id)
	}
	return nil, errorf("InvalidID", "The ID '%s' is not valid", id)
}
