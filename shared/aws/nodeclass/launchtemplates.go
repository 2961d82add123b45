package nodeclass

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

// NamePrefix starts the name of every launch template nodewright creates.
// nodewright uses its own prefix rather than Karpenter's
// "karpenter.k8s.aws/" so that the two never adopt, or delete, each other's
// templates in an account running both; nothing else depends on the name.
const NamePrefix = "nodewright/"

// Cluster holds the cluster settings user data needs.
type Cluster struct {
	// Name is the EKS cluster name.
	Name string
	// Endpoint is the API server URL.
	Endpoint string
	// CABundle is the cluster CA, base64-encoded PEM.
	CABundle string
	// ServiceCIDR is the Kubernetes service CIDR; required for AL2023. An
	// IPv6 CIDR makes the launch templates request an IPv6 address.
	ServiceCIDR string
	// DNS is the kube-dns ClusterIP ("" lets the AMI choose).
	DNS string
}

// TemplateRequest asks for the launch templates of one launch.
type TemplateRequest struct {
	Cluster Cluster
	// NodeClass is the claim's node class with its status resolved
	// (securityGroups, amis, instanceProfile or spec.instanceProfile).
	NodeClass *v1.EC2NodeClass
	// NodeClaim provides the node's labels, taints and startup taints.
	NodeClaim *v1.NodeClaim
	// CapacityType is the launch's capacity type (a node label).
	CapacityType string
	// ReservationID targets a capacity reservation (reserved launches).
	ReservationID string
	// ReservationType is the targeted reservation's type
	// (v1.ReservationTypeDefault or v1.ReservationTypeCapacityBlock; ""
	// means default). A capacity block makes the templates' market type
	// capacity-block, which EC2 requires of every launch into one (EC2 User
	// Guide, "Launch instances using Capacity Blocks"; without it the launch
	// fails with InvalidParameterValue). Ignored without ReservationID.
	ReservationType string
	// ReservationInterruptible marks the targeted reservation as an
	// interruptible capacity reservation: the templates' market type is
	// interruptible-capacity-reservation (karpenter-spec §4 step 6).
	// Ignored without ReservationID.
	ReservationInterruptible bool
	// InstanceTypes are the types to serve, cheapest first.
	InstanceTypes []*catalog.InstanceType
	// Tenancy is the launch's tenancy (launch.Tenancy): "dedicated" sets
	// the templates' Placement.Tenancy; "" or "default" leaves it unset
	// (EC2's default tenancy).
	Tenancy string
}

// EnsureLaunchTemplates makes sure a launch template exists for every group
// of the requested instance types that shares an AMI and a max-pods value
// (karpenter-spec §4 step 6, §9.3), creating missing ones, and returns them in
// the order their cheapest type appears. Each type uses the first status AMI
// whose requirements it satisfies; types without one are left out.
//
// A template holds the AMI, the block devices (spec.blockDeviceMappings or
// the family's defaults, sizes rounded up to GiB), the instance profile,
// detailed monitoring, the security groups (on the network interfaces when
// spec.networkInterfaces, associatePublicIPAddress, ipPrefixCount,
// connectionTracking or an IPv6 cluster needs them; spec.connectionTracking's
// timeouts, in seconds, go on every interface), IMDS options (default: endpoint enabled, IPv6
// disabled, hop limit 1, tokens required; instance tags off), the capacity
// reservation preference (the target reservation, else none) with, for a
// capacity block or an interruptible reservation, its market type, the user data
// (amifamily, base64), spec.cpuOptions.nestedVirtualization as CpuOptions,
// the placement (Tenancy dedicated for a dedicated
// launch; GroupId of status.placementGroup, whose ID also joins the node
// labels as karpenter.k8s.aws/placement-group-id) and, as tags of itself and of its network interfaces
// (and spot requests), the launch tags. Its name is NamePrefix and 32 hex
// digits of a SHA-256 over the cluster name and all of that, so a template
// is never changed once created: any difference gives a new name. The
// CreateLaunchTemplate ClientToken is derived from the same hash, so
// concurrent creators agree.
//
// Errors: an invalid request (no node class or claim, unknown family,
// restricted tags, unresolved security groups, AMIs or instance profile), no
// AMI for any type, user data that cannot be rendered, or a failed call
// (wrapped).
func (r *Resolver) EnsureLaunchTemplates(ctx context.Context, req TemplateRequest) ([]launch.Template, error) {
	wanted, err := templates(req)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(wanted))
	for i, w := range wanted {
		names[i] = w.name
	}
	existing := map[string]bool{}
	in := &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{{Name: aws.String("launch-template-name"), Values: names}}}
	for {
		out, err := r.ec2.DescribeLaunchTemplates(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("describe launch templates: %w", err)
		}
		for _, lt := range out.LaunchTemplates {
			existing[aws.ToString(lt.LaunchTemplateName)] = true
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	result := make([]launch.Template, len(wanted))
	for i, w := range wanted {
		if !existing[w.name] {
			_, err := r.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
				LaunchTemplateName: aws.String(w.name),
				LaunchTemplateData: w.data,
				ClientToken:        aws.String(w.token),
				TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: w.tags}},
			})
			if err != nil && awserr.Classify(err) != awserr.AlreadyExists {
				return nil, fmt.Errorf("create launch template %s: %w", w.name, err)
			}
		}
		result[i] = launch.Template{Name: w.name, ImageID: aws.ToString(w.data.ImageId), InstanceTypes: w.types}
	}
	return result, nil
}

// wantedTemplate is a launch template to ensure.
type wantedTemplate struct {
	name, token string
	data        *ec2types.RequestLaunchTemplateData
	tags        []ec2types.Tag
	types       []string
}

// templates builds the launch templates of a request without calling AWS.
func templates(req TemplateRequest) ([]wantedTemplate, error) {
	nc, claim := req.NodeClass, req.NodeClaim
	switch {
	case nc == nil:
		return nil, errors.New("launch templates: node class: nil")
	case claim == nil:
		return nil, errors.New("launch templates: nodeclaim: nil")
	case req.Cluster.Name == "":
		return nil, errors.New("launch templates: cluster name: required")
	}
	family, err := amifamily.ForNodeClass(nc)
	if err != nil {
		return nil, fmt.Errorf("launch templates: node class %s: %w", nc.Name, err)
	}
	if err := amifamily.ValidateTags(nc.Spec.Tags); err != nil {
		return nil, fmt.Errorf("launch templates: node class %s: %w", nc.Name, err)
	}
	profile := nc.Status.InstanceProfile
	if profile == "" && nc.Spec.InstanceProfile != nil {
		profile = *nc.Spec.InstanceProfile
	}
	switch {
	case profile == "":
		return nil, fmt.Errorf("launch templates: node class %s: instance profile not resolved (status.instanceProfile)", nc.Name)
	case len(nc.Status.SecurityGroups) == 0:
		return nil, fmt.Errorf("launch templates: node class %s: %w (status.securityGroups is empty)", nc.Name, ErrSecurityGroupsNotFound)
	case len(nc.Status.AMIs) == 0:
		return nil, fmt.Errorf("launch templates: node class %s: %w (status.amis is empty)", nc.Name, ErrAMIsNotFound)
	}
	amiReqs := make([]requirements.Requirements, len(nc.Status.AMIs))
	for i, ami := range nc.Status.AMIs {
		amiReqs[i] = requirements.FromNodeSelector(ami.Requirements)
	}
	type key struct {
		image   string
		maxPods int32
	}
	var order []key
	groups := map[key][]string{}
	for _, it := range req.InstanceTypes {
		i := slices.IndexFunc(amiReqs, func(r requirements.Requirements) bool { return launch.AdmitsType(r, it) })
		if i < 0 {
			continue
		}
		k := key{image: nc.Status.AMIs[i].ID, maxPods: maxPods(it)}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], it.Name)
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("launch templates: node class %s: %w for any of the %d instance types", nc.Name, ErrAMIsNotFound, len(req.InstanceTypes))
	}
	launchTags := amifamily.LaunchTags(req.Cluster.Name, claim.Labels[v1.LabelNodePool], nc.Name, nc.Spec.Tags)
	tags := tagList(launchTags)
	labels := maps.Clone(claim.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1.LabelCapacityType] = req.CapacityType
	if req.ReservationID != "" {
		// The reservation labels Karpenter puts on a reserved node (aws:
		// pkg/cloudprovider/cloudprovider.go instanceToNodeClaim).
		labels[v1.LabelCapacityReservationID] = req.ReservationID
		labels[v1.LabelCapacityReservationType] = reservationType(req.ReservationType)
	}
	if pg := nc.Status.PlacementGroup; pg != nil {
		// The placement group label of a node launched into the class's
		// group (aws: pkg/cloudprovider/cloudprovider.go instanceToNodeClaim).
		labels[v1.LabelPlacementGroupID] = pg.ID
	}
	taints := append(slices.Clone(claim.Spec.Taints), claim.Spec.StartupTaints...)
	var out []wantedTemplate
	for _, k := range order {
		userData, err := family.UserData(amifamily.Options{
			ClusterName: req.Cluster.Name, ClusterEndpoint: req.Cluster.Endpoint, CABundle: req.Cluster.CABundle,
			ClusterCIDR: req.Cluster.ServiceCIDR, ClusterDNS: req.Cluster.DNS, Kubelet: nc.Spec.Kubelet, MaxPods: k.maxPods,
			Labels: labels, Taints: taints, InstanceStorePolicy: nc.Spec.InstanceStorePolicy, UserData: nc.Spec.UserData,
		})
		if err != nil {
			return nil, fmt.Errorf("launch templates: node class %s: %w", nc.Name, err)
		}
		data := templateData(req, family, profile, k.image, userData, tags)
		sum, err := hash(req.Cluster.Name, data, tags)
		if err != nil {
			return nil, fmt.Errorf("launch templates: %w", err)
		}
		out = append(out, wantedTemplate{name: NamePrefix + sum[:32], token: sum[:64], data: data, tags: tags, types: groups[k]})
	}
	return out, nil
}

// maxPods is the type's pods capacity (the group's kubelet max pods).
func maxPods(it *catalog.InstanceType) int32 {
	q, ok := it.Capacity[corev1.ResourcePods]
	if !ok || q.Value() <= 0 {
		return 110
	}
	return int32(q.Value())
}

// templateData builds the RequestLaunchTemplateData of one group.
func templateData(req TemplateRequest, family amifamily.Family, profile, imageID, userData string, tags []ec2types.Tag) *ec2types.RequestLaunchTemplateData {
	nc := req.NodeClass
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String(imageID),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(profile)},
		Monitoring:         &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(aws.ToBool(nc.Spec.DetailedMonitoring))},
		MetadataOptions:    metadataOptions(nc.Spec.MetadataOptions),
		CapacityReservationSpecification: &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceNone,
		},
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: tags}},
	}
	if userData != "" { // Custom without spec.userData has none
		data.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(userData)))
	}
	if req.ReservationID != "" {
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
			CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(req.ReservationID)},
		}
		if m := marketType(req); m != "" {
			data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: m}
		}
	}
	if c := nc.Spec.CPUOptions; c != nil && c.NestedVirtualization != nil {
		data.CpuOptions = &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecification(*c.NestedVirtualization)}
	}
	if req.Tenancy == launch.TenancyDedicated {
		data.Placement = &ec2types.LaunchTemplatePlacementRequest{Tenancy: ec2types.TenancyDedicated}
	}
	if pg := nc.Status.PlacementGroup; pg != nil {
		// The group by ID, as Karpenter's launch template names it (aws:
		// pkg/providers/launchtemplate/types.go buildPlacement); EC2 picks
		// the partition of a partition group.
		if data.Placement == nil {
			data.Placement = &ec2types.LaunchTemplatePlacementRequest{}
		}
		data.Placement.GroupId = aws.String(pg.ID)
	}
	if req.CapacityType == v1.CapacityTypeSpot {
		data.TagSpecifications = append(data.TagSpecifications, ec2types.LaunchTemplateTagSpecificationRequest{ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: tags})
	}
	bdms := nc.Spec.BlockDeviceMappings
	if len(bdms) == 0 {
		bdms = family.DefaultBlockDeviceMappings()
	}
	for _, m := range bdms {
		if m == nil {
			continue
		}
		data.BlockDeviceMappings = append(data.BlockDeviceMappings, blockDevice(m))
	}
	groups := make([]string, len(nc.Status.SecurityGroups))
	for i, g := range nc.Status.SecurityGroups {
		groups[i] = g.ID
	}
	ipv6 := strings.Contains(req.Cluster.ServiceCIDR, ":")
	if len(nc.Spec.NetworkInterfaces) == 0 && nc.Spec.AssociatePublicIPAddress == nil && nc.Spec.IPPrefixCount == nil && nc.Spec.ConnectionTracking == nil && !ipv6 {
		data.SecurityGroupIds = groups
		return data
	}
	nis := nc.Spec.NetworkInterfaces
	if len(nis) == 0 {
		nis = []v1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: "interface"}}
	}
	for _, ni := range nis {
		spec := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			NetworkCardIndex:    aws.Int32(ni.NetworkCardIndex),
			DeviceIndex:         aws.Int32(ni.DeviceIndex),
			Groups:              groups,
			DeleteOnTermination: aws.Bool(true),
		}
		if ct := nc.Spec.ConnectionTracking; ct != nil {
			spec.ConnectionTrackingSpecification = &ec2types.ConnectionTrackingSpecificationRequest{
				TcpEstablishedTimeout: ct.TCPEstablishedTimeout, UdpStreamTimeout: ct.UDPStreamTimeout, UdpTimeout: ct.UDPTimeout,
			}
		}
		if ni.InterfaceType == "efa-only" {
			spec.InterfaceType = aws.String("efa-only")
		}
		if ni.NetworkCardIndex == 0 && ni.DeviceIndex == 0 {
			spec.AssociatePublicIpAddress = nc.Spec.AssociatePublicIPAddress
			if ipv6 {
				spec.PrimaryIpv6 = aws.Bool(true)
				spec.Ipv6AddressCount = aws.Int32(1)
			}
			if nc.Spec.IPPrefixCount != nil {
				if ipv6 {
					spec.Ipv6PrefixCount = aws.Int32(*nc.Spec.IPPrefixCount)
				} else {
					spec.Ipv4PrefixCount = aws.Int32(*nc.Spec.IPPrefixCount)
				}
			}
		}
		data.NetworkInterfaces = append(data.NetworkInterfaces, spec)
	}
	return data
}

// reservationType is t, or v1.ReservationTypeDefault when t is "".
func reservationType(t string) string {
	if t == "" {
		return v1.ReservationTypeDefault
	}
	return t
}

// marketType is the launch template market type of a reserved launch:
// capacity-block into a capacity block, interruptible-capacity-reservation
// into an interruptible reservation, none ("") into an On-Demand Capacity
// Reservation (EC2 API LaunchTemplateInstanceMarketOptionsRequest;
// karpenter-spec §4 step 6).
func marketType(req TemplateRequest) ec2types.MarketType {
	switch {
	case req.ReservationType == v1.ReservationTypeCapacityBlock:
		return ec2types.MarketTypeCapacityBlock
	case req.ReservationInterruptible:
		return ec2types.MarketTypeInterruptibleCapacityReservation
	}
	return ""
}

// metadataOptions applies the CRD defaults (karpenter-spec §1.3).
func metadataOptions(m *v1.MetadataOptions) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	out := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
		HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled,
		HttpPutResponseHopLimit: aws.Int32(1),
		HttpTokens:              ec2types.LaunchTemplateHttpTokensStateRequired,
		InstanceMetadataTags:    ec2types.LaunchTemplateInstanceMetadataTagsStateDisabled,
	}
	if m == nil {
		return out
	}
	if m.HTTPEndpoint != nil {
		out.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*m.HTTPEndpoint)
	}
	if m.HTTPProtocolIPv6 != nil {
		out.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*m.HTTPProtocolIPv6)
	}
	if m.HTTPPutResponseHopLimit != nil {
		out.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
	}
	if m.HTTPTokens != nil {
		out.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*m.HTTPTokens)
	}
	return out
}

// blockDevice converts one mapping; the size is rounded up to whole GiB.
func blockDevice(m *v1.BlockDeviceMapping) ec2types.LaunchTemplateBlockDeviceMappingRequest {
	out := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName}
	if m.EBS == nil {
		return out
	}
	e := m.EBS
	ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{
		DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, KmsKeyId: e.KMSKeyID, SnapshotId: e.SnapshotID,
		VolumeInitializationRate: e.VolumeInitializationRate,
	}
	if e.IOPS != nil {
		ebs.Iops = aws.Int32(int32(*e.IOPS))
	}
	if e.Throughput != nil {
		ebs.Throughput = aws.Int32(int32(*e.Throughput))
	}
	if e.VolumeType != nil {
		ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
	}
	if e.VolumeSize != nil {
		const gib = 1 << 30
		ebs.VolumeSize = aws.Int32(int32((e.VolumeSize.Value() + gib - 1) / gib))
	}
	out.Ebs = ebs
	return out
}

// hash is the hex SHA-256 of the cluster name, template data and tags.
func hash(cluster string, data *ec2types.RequestLaunchTemplateData, tags []ec2types.Tag) (string, error) {
	b, err := json.Marshal(struct {
		Cluster string
		Data    *ec2types.RequestLaunchTemplateData
		Tags    []ec2types.Tag
	}{cluster, data, tags})
	if err != nil {
		return "", fmt.Errorf("hash launch template: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func tagList(tags map[string]string) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}
