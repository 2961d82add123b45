// Package v1 is nodewright's versioned JSON contract: the Karpenter v1 API
// types (karpenter.sh/v1 NodePool and NodeClaim, karpenter.k8s.aws/v1
// EC2NodeClass), their defaults and validation, and the well-known label,
// annotation, taint and finalizer keys. It reads users' Karpenter manifests
// unchanged.
package v1

import "regexp"

// API groups and kinds.
const (
	Group            = "karpenter.sh"
	AWSGroup         = "karpenter.k8s.aws"
	KindNodePool     = "NodePool"
	KindNodeClaim    = "NodeClaim"
	KindEC2NodeClass = "EC2NodeClass"
)

// Well-known labels (karpenter: pkg/apis/v1/labels.go; aws: pkg/apis/v1/labels.go).
const (
	LabelNodePool        = "karpenter.sh/nodepool"
	LabelCapacityType    = "karpenter.sh/capacity-type"
	LabelRegistered      = "karpenter.sh/registered"
	LabelInitialized     = "karpenter.sh/initialized"
	LabelDoNotSyncTaints = "karpenter.sh/do-not-sync-taints"

	LabelTopologyZone   = "topology.kubernetes.io/zone"
	LabelTopologyRegion = "topology.kubernetes.io/region"
	LabelInstanceType   = "node.kubernetes.io/instance-type"
	LabelArch           = "kubernetes.io/arch"
	LabelOS             = "kubernetes.io/os"
	LabelHostname       = "kubernetes.io/hostname"
	LabelWindowsBuild   = "node.kubernetes.io/windows-build"
	LabelZoneID         = "topology.k8s.aws/zone-id"

	LabelEC2NodeClass                      = "karpenter.k8s.aws/ec2nodeclass"
	LabelInstanceCategory                  = "karpenter.k8s.aws/instance-category"
	LabelInstanceFamily                    = "karpenter.k8s.aws/instance-family"
	LabelInstanceGeneration                = "karpenter.k8s.aws/instance-generation"
	LabelInstanceSize                      = "karpenter.k8s.aws/instance-size"
	LabelInstanceCPU                       = "karpenter.k8s.aws/instance-cpu"
	LabelInstanceCPUManufacturer           = "karpenter.k8s.aws/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockSpeedMhz = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory                    = "karpenter.k8s.aws/instance-memory"
	LabelInstanceEBSBandwidth              = "karpenter.k8s.aws/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth          = "karpenter.k8s.aws/instance-network-bandwidth"
	LabelInstanceLocalNVME                 = "karpenter.k8s.aws/instance-local-nvme"
	LabelInstanceHypervisor                = "karpenter.k8s.aws/instance-hypervisor"
	LabelInstanceEncryptionInTransit       = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
	LabelInstanceCapabilityFlex            = "karpenter.k8s.aws/instance-capability-flex"
	LabelInstanceGPUName                   = "karpenter.k8s.aws/instance-gpu-name"
	LabelInstanceGPUManufacturer           = "karpenter.k8s.aws/instance-gpu-manufacturer"
	LabelInstanceGPUCount                  = "karpenter.k8s.aws/instance-gpu-count"
	LabelInstanceGPUMemory                 = "karpenter.k8s.aws/instance-gpu-memory"
	LabelInstanceAcceleratorName           = "karpenter.k8s.aws/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer   = "karpenter.k8s.aws/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount          = "karpenter.k8s.aws/instance-accelerator-count"
	LabelInstanceTenancy                   = "karpenter.k8s.aws/instance-tenancy"
	LabelCapacityReservationID             = "karpenter.k8s.aws/capacity-reservation-id"
	LabelCapacityReservationType           = "karpenter.k8s.aws/capacity-reservation-type"
	LabelCapacityReservationInterruptible  = "karpenter.k8s.aws/capacity-reservation-interruptible"
	LabelPlacementGroupID                  = "karpenter.k8s.aws/placement-group-id"
	LabelPlacementGroupPartition           = "karpenter.k8s.aws/placement-group-partition"
	// LabelNitroSandbox is newer than v1.14.1 (HEAD only); tolerated.
	LabelNitroSandbox = "karpenter.k8s.aws/nitro-sandbox"
)

// Other node labels Karpenter reads or writes.
const (
	// LabelExcludeFromLoadBalancers is added (value "karpenter") to a node
	// being terminated (karpenter: pkg/controllers/node/termination/terminator/terminator.go).
	LabelExcludeFromLoadBalancers = "node.kubernetes.io/exclude-from-external-load-balancers"
	// LabelNodeClass is the label naming a NodeClaim's node class:
	// "<group>/<lowercase kind>" (NodeClassLabelKey in karpenter core).
	LabelNodeClass = LabelEC2NodeClass
)

// Label domains (karpenter: pkg/apis/v1/labels.go RestrictedLabelDomains and
// LabelDomainExceptions; aws: pkg/apis/v1/labels.go adds karpenter.k8s.aws).
// A key whose domain ends in a restricted domain may not be set in a NodePool
// template or requirement unless it is a well-known label or its domain ends
// in an exception.
var (
	RestrictedLabelDomains = []string{"kubernetes.io", "k8s.io", Group, AWSGroup}
	LabelDomainExceptions  = []string{"kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"}
)

// Capacity types (values of karpenter.sh/capacity-type).
const (
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeSpot     = "spot"
	CapacityTypeReserved = "reserved"
)

// Annotations (karpenter: pkg/apis/v1/labels.go; aws: pkg/apis/v1/labels.go).
const (
	AnnotationPriceOverlayApplied    = "karpenter.sh/price-overlay-applied"
	AnnotationCapacityOverlayApplied = "karpenter.sh/capacity-overlay-applied"
	AnnotationRequestedDRADrivers    = "karpenter.sh/requested-dra-drivers"

	AnnotationDoNotDisrupt                = "karpenter.sh/do-not-disrupt"
	AnnotationNodePoolHash                = "karpenter.sh/nodepool-hash"
	AnnotationNodePoolHashVersion         = "karpenter.sh/nodepool-hash-version"
	AnnotationNodeClaimTerminationTime    = "karpenter.sh/nodeclaim-termination-timestamp"
	AnnotationNodeClaimMinValuesRelaxed   = "karpenter.sh/nodeclaim-min-values-relaxed"
	AnnotationEC2NodeClassHash            = "karpenter.k8s.aws/ec2nodeclass-hash"
	AnnotationEC2NodeClassHashVersion     = "karpenter.k8s.aws/ec2nodeclass-hash-version"
	AnnotationInstanceProfileName         = "karpenter.k8s.aws/instance-profile-name"
	AnnotationInstanceTagged              = "karpenter.k8s.aws/tagged"
	AnnotationClusterNameTaggedCompatible = "compatibility.karpenter.k8s.aws/cluster-name-tagged"

	// NodePoolHashVersion is the value Karpenter v1.14.1 writes.
	NodePoolHashVersion = "v3"
	// EC2NodeClassHashVersion is the value karpenter-provider-aws v1.14.1 writes.
	EC2NodeClassHashVersion = "v5"
)

// Taint keys. Karpenter applies karpenter.sh/disrupted with effect
// NoSchedule and karpenter.sh/unregistered with effect NoExecute.
const (
	TaintKeyDisrupted    = "karpenter.sh/disrupted"
	TaintKeyUnregistered = "karpenter.sh/unregistered"
)

// EphemeralTaintKeys are taints a new node carries for a while; an
// uninitialized node is considered without them
// (karpenter: pkg/controllers/state/statenode.go). The cloud-provider taint
// has value "true".
var EphemeralTaintKeys = []string{
	"node.kubernetes.io/not-ready",
	"node.kubernetes.io/unreachable",
	"node.cloudprovider.kubernetes.io/uninitialized",
	TaintKeyUnregistered,
}

// EC2 tag keys Karpenter sets on what it launches (aws: pkg/utils/utils.go
// GetTags; aws: pkg/controllers/nodeclaim/tagging/controller.go). The
// cluster tag is TagKeyClusterPrefix + cluster name, value "owned".
const (
	TagKeyClusterPrefix  = "kubernetes.io/cluster/"
	TagKeyEKSClusterName = "eks:eks-cluster-name"
	TagKeyNodePool       = LabelNodePool
	TagKeyNodeClaim      = "karpenter.sh/nodeclaim"
	TagKeyEC2NodeClass   = LabelEC2NodeClass
	TagKeyName           = "Name"
)

// TagKeyOwner is nodewright's ownership mark: every instance and launch
// template nodewright creates carries TagKeyOwner=<cluster name>, written in
// the create call itself (CreateFleet and CreateLaunchTemplate
// TagSpecifications) and required there by the IAM conditions of the
// stack. Karpenter never writes a key in the nodewright.dev domain, so the
// mark tells nodewright's resources from Karpenter's, which carry the same
// cluster, NodePool and EC2NodeClass tags. It is never added to an existing
// resource.
const TagKeyOwner = "nodewright.dev/owner"

// AnnotationAdoptedFrom marks a NodeClaim nodewright adopted rather than
// launched (its value names the launcher, "karpenter"). The record keeps the
// adopted NodeClaim's name, so the Karpenter NodeClaim object in the cluster
// becomes its mirror.
const AnnotationAdoptedFrom = "nodewright.dev/adopted-from"

// OwnedBy reports whether tags carry nodewright's ownership mark for
// cluster (TagKeyOwner=<cluster>). It is the one test of "nodewright
// launched this" for an EC2 resource that no NodeClaim record names:
// garbage collection removes nothing else. An empty cluster owns nothing.
func OwnedBy(tags map[string]string, cluster string) bool {
	return cluster != "" && tags[TagKeyOwner] == cluster
}

// Finalizers.
const (
	TerminationFinalizer             = "karpenter.sh/termination"
	EC2NodeClassTerminationFinalizer = "karpenter.k8s.aws/termination"
)

// WellKnownLabels are the scheduling keys every instance type defines; a
// pod may constrain them without a NodePool defining them.
var WellKnownLabels = map[string]bool{
	LabelNodePool: true, LabelTopologyZone: true, LabelTopologyRegion: true,
	LabelInstanceType: true, LabelArch: true, LabelOS: true, LabelCapacityType: true,
	LabelWindowsBuild: true, LabelZoneID: true, LabelEC2NodeClass: true,
	LabelInstanceCategory: true, LabelInstanceFamily: true, LabelInstanceGeneration: true,
	LabelInstanceSize: true, LabelInstanceCPU: true, LabelInstanceCPUManufacturer: true,
	LabelInstanceCPUSustainedClockSpeedMhz: true, LabelInstanceMemory: true,
	LabelInstanceEBSBandwidth: true, LabelInstanceNetworkBandwidth: true,
	LabelInstanceLocalNVME: true, LabelInstanceHypervisor: true,
	LabelInstanceEncryptionInTransit: true, LabelInstanceCapabilityFlex: true,
	LabelInstanceGPUName: true, LabelInstanceGPUManufacturer: true, LabelInstanceGPUCount: true,
	LabelInstanceGPUMemory: true, LabelInstanceAcceleratorName: true,
	LabelInstanceAcceleratorManufacturer: true, LabelInstanceAcceleratorCount: true,
	LabelInstanceTenancy: true, LabelCapacityReservationID: true,
	LabelCapacityReservationType: true, LabelCapacityReservationInterruptible: true,
	LabelPlacementGroupID: true, LabelPlacementGroupPartition: true,
}

// NormalizedLabels maps deprecated label keys to their stable equivalents.
var NormalizedLabels = map[string]string{
	"failure-domain.beta.kubernetes.io/zone":   LabelTopologyZone,
	"failure-domain.beta.kubernetes.io/region": LabelTopologyRegion,
	"beta.kubernetes.io/arch":                  LabelArch,
	"beta.kubernetes.io/os":                    LabelOS,
	"beta.kubernetes.io/instance-type":         LabelInstanceType,
}

// zoneNamePattern splits a zone name into its region and suffix
// (us-east-1a, us-east-1-bos-1a), per AWS's zone naming (EC2
// DescribeAvailabilityZones ZoneName).
var zoneNamePattern = regexp.MustCompile(`^([a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-[0-9]+)([a-z]|-[a-z]+-[0-9]+[a-z])$`)

// RegionOfZone returns the region of an Availability or Local Zone name
// ("us-east-1" for "us-east-1a" and "us-east-1-bos-1a"); ok is false when
// zone is not named as AWS names zones.
func RegionOfZone(zone string) (region string, ok bool) {
	m := zoneNamePattern.FindStringSubmatch(zone)
	if m == nil {
		return "", false
	}
	return m[1], true
}
