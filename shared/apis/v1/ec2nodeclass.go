package v1

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass is karpenter.k8s.aws/v1 EC2NodeClass: how to launch an EC2
// instance (AMI, subnets, security groups, IAM, user data, kubelet, disks).
// Field names and JSON tags follow karpenter-provider-aws v1.14.1
// (aws: pkg/apis/v1/ec2nodeclass.go).
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              EC2NodeClassSpec   `json:"spec"`
	Status            EC2NodeClassStatus `json:"status,omitzero"`
}

// EC2NodeClassSpec is the desired launch configuration.
type EC2NodeClassSpec struct {
	SubnetSelectorTerms              []SubnetSelectorTerm              `json:"subnetSelectorTerms"`
	SecurityGroupSelectorTerms       []SecurityGroupSelectorTerm       `json:"securityGroupSelectorTerms"`
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	PlacementGroupSelector           *PlacementGroupSelector           `json:"placementGroupSelector,omitempty"`
	AssociatePublicIPAddress         *bool                             `json:"associatePublicIPAddress,omitempty"`
	IPPrefixCount                    *int32                            `json:"ipPrefixCount,omitempty"`
	AMISelectorTerms                 []AMISelectorTerm                 `json:"amiSelectorTerms"`
	// AMIFamily is AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022
	// or Windows2025; required unless an alias term names the family.
	AMIFamily           *string               `json:"amiFamily,omitempty"`
	UserData            *string               `json:"userData,omitempty"`
	Role                string                `json:"role,omitempty"`
	InstanceProfile     *string               `json:"instanceProfile,omitempty"`
	Tags                map[string]string     `json:"tags,omitempty"`
	Kubelet             *KubeletConfiguration `json:"kubelet,omitempty"`
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	InstanceStorePolicy *string               `json:"instanceStorePolicy,omitempty"`
	NetworkInterfaces   []NetworkInterface    `json:"networkInterfaces,omitempty"`
	DetailedMonitoring  *bool                 `json:"detailedMonitoring,omitempty"`
	MetadataOptions     *MetadataOptions      `json:"metadataOptions,omitempty"`
	ConnectionTracking  *ConnectionTracking   `json:"connectionTracking,omitempty"`
	Context             *string               `json:"context,omitempty"`
	CPUOptions          *CPUOptions           `json:"cpuOptions,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags or id (terms ORed, fields ANDed).
type SubnetSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, id or group name.
type SecurityGroupSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
	Name string            `json:"name,omitempty"`
}

// CapacityReservationSelectorTerm selects capacity reservations.
type CapacityReservationSelectorTerm struct {
	Tags                  map[string]string `json:"tags,omitempty"`
	ID                    string            `json:"id,omitempty"`
	OwnerID               string            `json:"ownerID,omitempty"`
	InstanceMatchCriteria string            `json:"instanceMatchCriteria,omitempty"`
}

// PlacementGroupSelector selects one placement group by name or id.
type PlacementGroupSelector struct {
	Name string `json:"name,omitempty"`
	ID   string `json:"id,omitempty"`
}

// AMISelectorTerm selects AMIs by alias ("al2023@latest"), tags, id, name
// (+owner) or SSM parameter.
type AMISelectorTerm struct {
	Alias        string            `json:"alias,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
	ID           string            `json:"id,omitempty"`
	Name         string            `json:"name,omitempty"`
	Owner        string            `json:"owner,omitempty"`
	SSMParameter string            `json:"ssmParameter,omitempty"`
}

// KubeletConfiguration is the v1.14.1 typed spec.kubelet (aws:
// pkg/apis/v1/ec2nodeclass.go; karpenter-spec §9.4).
type KubeletConfiguration struct {
	ClusterDNS                  []string            `json:"clusterDNS,omitempty"`
	MaxPods                     *int32              `json:"maxPods,omitempty"`
	PodsPerCore                 *int32              `json:"podsPerCore,omitempty"`
	SystemReserved              map[string]string   `json:"systemReserved,omitempty"`
	KubeReserved                map[string]string   `json:"kubeReserved,omitempty"`
	EvictionHard                map[string]string   `json:"evictionHard,omitempty"`
	EvictionSoft                map[string]string   `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod     map[string]Duration `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMaxPodGracePeriod   *int32              `json:"evictionMaxPodGracePeriod,omitempty"`
	ImageGCHighThresholdPercent *int32              `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent  *int32              `json:"imageGCLowThresholdPercent,omitempty"`
	CPUCFSQuota                 *bool               `json:"cpuCFSQuota,omitempty"`
	// Extra holds keys outside the v1.14.1 typed schema: Karpenter HEAD
	// accepts any upstream KubeletConfiguration key. They survive a round
	// trip and are reported as warnings; nodewright does not act on them.
	Extra map[string]json.RawMessage `json:"-"`
}

// BlockDeviceMapping is one EBS volume of the launch template.
type BlockDeviceMapping struct {
	DeviceName *string      `json:"deviceName,omitempty"`
	EBS        *BlockDevice `json:"ebs,omitempty"`
	RootVolume bool         `json:"rootVolume,omitempty"`
}

// BlockDevice is the EBS part of a BlockDeviceMapping.
type BlockDevice struct {
	DeleteOnTermination      *bool              `json:"deleteOnTermination,omitempty"`
	Encrypted                *bool              `json:"encrypted,omitempty"`
	IOPS                     *int64             `json:"iops,omitempty"`
	KMSKeyID                 *string            `json:"kmsKeyID,omitempty"`
	SnapshotID               *string            `json:"snapshotID,omitempty"`
	Throughput               *int64             `json:"throughput,omitempty"`
	VolumeInitializationRate *int32             `json:"volumeInitializationRate,omitempty"`
	VolumeSize               *resource.Quantity `json:"volumeSize,omitempty"`
	VolumeType               *string            `json:"volumeType,omitempty"`
}

// NetworkInterface is one entry of spec.networkInterfaces (EFA, multi-card).
type NetworkInterface struct {
	NetworkCardIndex int32  `json:"networkCardIndex"`
	DeviceIndex      int32  `json:"deviceIndex"`
	InterfaceType    string `json:"interfaceType"`
}

// MetadataOptions configures IMDS. Default {httpEndpoint: enabled,
// httpProtocolIPv6: disabled, httpPutResponseHopLimit: 1, httpTokens: required}.
type MetadataOptions struct {
	HTTPEndpoint            *string `json:"httpEndpoint,omitempty"`
	HTTPProtocolIPv6        *string `json:"httpProtocolIPv6,omitempty"`
	HTTPPutResponseHopLimit *int64  `json:"httpPutResponseHopLimit,omitempty"`
	HTTPTokens              *string `json:"httpTokens,omitempty"`
}

// ConnectionTracking sets ENI connection-tracking timeouts (seconds).
type ConnectionTracking struct {
	TCPEstablishedTimeout *int32 `json:"tcpEstablishedTimeout,omitempty"`
	UDPStreamTimeout      *int32 `json:"udpStreamTimeout,omitempty"`
	UDPTimeout            *int32 `json:"udpTimeout,omitempty"`
}

// CPUOptions carries CPU features the instance type must support.
type CPUOptions struct {
	NestedVirtualization *string `json:"nestedVirtualization,omitempty"`
}

// EC2NodeClassStatus is the resolved state of an EC2NodeClass.
type EC2NodeClassStatus struct {
	Subnets              []Subnet              `json:"subnets,omitempty"`
	SecurityGroups       []SecurityGroup       `json:"securityGroups,omitempty"`
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	AMIs                 []AMI                 `json:"amis,omitempty"`
	InstanceProfile      string                `json:"instanceProfile,omitempty"`
	// PlacementGroup is the group spec.placementGroupSelector resolved to
	// (nil without a selector, or while it resolves to none). Karpenter
	// keeps it in its placement-group provider's memory, not in the
	// object's status (aws: pkg/providers/placementgroup); nodewright
	// carries it in the API's resolution record, from discovery to the
	// launch template, the node labels and PlacementGroupDrift, and the
	// forwarder does not write it on the EC2NodeClass.
	PlacementGroup *PlacementGroup    `json:"placementGroup,omitempty"`
	Conditions     []metav1.Condition `json:"conditions,omitempty"`
}

// PlacementGroup is a resolved placement group, from a
// DescribePlacementGroups entry in state available (the fields Karpenter's
// provider keeps: aws: pkg/providers/placementgroup/types.go).
type PlacementGroup struct {
	// ID is its GroupId, "pg-" and hex digits.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Strategy is cluster, partition or spread.
	Strategy string `json:"strategy"`
	// PartitionCount is the number of partitions of a partition group
	// (1..7), 0 otherwise.
	PartitionCount int32 `json:"partitionCount,omitempty"`
	// SpreadLevel is rack or host for a spread group, "" otherwise.
	SpreadLevel string `json:"spreadLevel,omitempty"`
}

// Placement group strategies (EC2 PlacementStrategy).
const (
	PlacementStrategyCluster   = "cluster"
	PlacementStrategyPartition = "partition"
	PlacementStrategySpread    = "spread"
)

// ConditionReasonPlacementGroupNotFound is Karpenter's PlacementGroupReady
// False reason when spec.placementGroupSelector matches no placement group
// in state available (aws: pkg/controllers/nodeclass/placementgroup.go).
// A resolution that ends with it carries it as its Ready reason.
const ConditionReasonPlacementGroupNotFound = "PlacementGroupNotFound"

// Subnet is a resolved subnet.
type Subnet struct {
	ID     string `json:"id"`
	Zone   string `json:"zone"`
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// CapacityReservation is a resolved capacity reservation, one entry of
// status.capacityReservations (karpenter-spec section 2, EC2NodeClass
// status; filled from DescribeCapacityReservations).
type CapacityReservation struct {
	AvailabilityZone      string       `json:"availabilityZone"`
	EndTime               *metav1.Time `json:"endTime,omitempty"`
	ID                    string       `json:"id"`
	InstanceMatchCriteria string       `json:"instanceMatchCriteria,omitempty"`
	InstanceType          string       `json:"instanceType"`
	OwnerID               string       `json:"ownerID"`
	ReservationType       string       `json:"reservationType,omitempty"`
	Interruptible         bool         `json:"interruptible,omitempty"`
	State                 string       `json:"state,omitempty"`
}

// Capacity reservation types and states, as status.capacityReservations
// and the karpenter.k8s.aws/capacity-reservation-type label spell them.
const (
	// ReservationTypeDefault is an On-Demand Capacity Reservation.
	ReservationTypeDefault = "default"
	// ReservationTypeCapacityBlock is an EC2 Capacity Block for ML.
	ReservationTypeCapacityBlock = "capacity-block"
	// ReservationStateActive is a reservation nodewright may launch into.
	ReservationStateActive = "active"
	// ReservationStateExpiring is a capacity block within
	// CapacityBlockExpiryLead of its end: nothing launches into it and its
	// NodeClaims are disrupted.
	ReservationStateExpiring = "expiring"
)

// CapacityBlockExpiryLead is how long before a capacity block's end time
// Karpenter treats it as expiring (karpenter-spec section 3: capacity
// blocks are `expiring` 40 min before EndDate).
const CapacityBlockExpiryLead = 40 * time.Minute

// StateAt is the reservation's state at now: ReservationStateExpiring for
// a capacity block whose EndTime is at most CapacityBlockExpiryLead away
// (or past), else ReservationStateActive. It is the one rule for that
// state; discovery writes its result into State.
func (r CapacityReservation) StateAt(now time.Time) string {
	if r.ReservationType == ReservationTypeCapacityBlock && r.EndTime != nil &&
		!now.Before(r.EndTime.Add(-CapacityBlockExpiryLead)) {
		return ReservationStateExpiring
	}
	return ReservationStateActive
}

// CapacityReservationsResolved reports whether status.capacityReservations
// is discovery's answer for the class's current spec: the
// CapacityReservationsReady condition is True and was observed at the
// class's generation, or, on a class without that condition (the API's
// own resolution, adapters.NodeClasses, which records one Ready condition
// and fails the whole resolution when DescribeCapacityReservations
// fails), Ready is True at the class's generation: Karpenter's Ready
// depends on CapacityReservationsReady (aws:
// pkg/apis/v1/ec2nodeclass_status.go). An empty list then means no
// reservation is selected; before that (discovery not run yet, failed, or
// behind a spec change) the list says nothing, and no rule may read a
// reservation's absence from it (no CapacityReservationDrift, no reserved
// -> on-demand demotion).
func (nc *EC2NodeClass) CapacityReservationsResolved() bool {
	var ready *metav1.Condition
	for i, c := range nc.Status.Conditions {
		switch c.Type {
		case ConditionTypeCapacityReservationsReady:
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == nc.Generation
		case ConditionTypeReady:
			ready = &nc.Status.Conditions[i]
		}
	}
	return ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == nc.Generation
}

// AMI is a resolved image with the requirements it applies to.
type AMI struct {
	ID           string                                 `json:"id"`
	Name         string                                 `json:"name,omitempty"`
	Deprecated   bool                                   `json:"deprecated,omitempty"`
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
}

// EC2NodeClassList is a list of EC2NodeClasses.
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}

// AMI families accepted by spec.amiFamily.
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyCustom       = "Custom"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
)

// EC2NodeClass condition types (aws: pkg/apis/v1/ec2nodeclass_status.go).
// Ready is AMIsReady, SubnetsReady, SecurityGroupsReady, InstanceProfileReady,
// ValidationSucceeded and PlacementGroupReady, plus CapacityReservationsReady
// when the ReservedCapacity feature gate is on.
const (
	ConditionTypeAMIsReady                 = "AMIsReady"
	ConditionTypeSubnetsReady              = "SubnetsReady"
	ConditionTypeSecurityGroupsReady       = "SecurityGroupsReady"
	ConditionTypeInstanceProfileReady      = "InstanceProfileReady"
	ConditionTypeCapacityReservationsReady = "CapacityReservationsReady"
	ConditionTypePlacementGroupReady       = "PlacementGroupReady"
)

// ConditionTypeEC2DataLive is nodewright's informational EC2NodeClass
// condition saying where the instance types, offerings and prices the
// class was resolved with came from: True (ConditionReasonEC2DataLive)
// when every part is the region's live answer and fresh, False with one of
// the reasons below when embedded tables or an estimate stand in for some
// part. Like Karpenter's non-root conditions it is not part of Ready: a
// class on the embedded tables still launches.
const ConditionTypeEC2DataLive = "EC2DataLive"

// EC2DataLive reasons, in the order the rule tests them
// (provisioning.EC2DataCondition).
const (
	// ConditionReasonEC2DataUnreadable: the stored live data could not be
	// read; every part came from the embedded tables.
	ConditionReasonEC2DataUnreadable = "Unreadable"
	// ConditionReasonEC2DataAwaitingRefresh: no part has been stored yet
	// (before the refresher's first run).
	ConditionReasonEC2DataAwaitingRefresh = "AwaitingFirstRefresh"
	// ConditionReasonEC2DataRefreshFailed: some part that should be live
	// has never been stored while others have (its fetch keeps failing).
	ConditionReasonEC2DataRefreshFailed = "RefreshFailed"
	// ConditionReasonEC2DataStale: every part is loaded but one is older
	// than catalog.StaleAfter (refreshes failing since).
	ConditionReasonEC2DataStale = "Stale"
	// ConditionReasonEC2DataIsolatedVPC: isolatedVPC is set, so on-demand
	// prices come from the embedded table (no Pricing API); the other
	// parts are live and fresh.
	ConditionReasonEC2DataIsolatedVPC = "IsolatedVPC"
	// ConditionReasonEC2DataLive: every part is live and fresh.
	ConditionReasonEC2DataLive = "Live"
)

// ConditionReasonUnsupportedAlias is the AMIsReady=False reason for an
// amiSelectorTerms alias the cluster's Kubernetes version has no AMIs for
// (AL2 on 1.33 and later, Windows2025 before 1.35; aws:
// pkg/controllers/nodeclass/ami.go). The class is not Ready, so neither is
// a NodePool that uses it.
const ConditionReasonUnsupportedAlias = "UnsupportedAlias"

// InstanceProfileReady=False reasons for a class whose spec.role gets no
// instance profile: ConditionReasonRoleNotAllowed when the role is not
// among the deployment's node roles (its message names spec.role and the
// allowed roles), ConditionReasonInstanceProfileFailed when IAM refused or
// lacks what the profile needs (the role, permissions, a profile of that
// name nodewright does not own). The class is not Ready and never launches.
const (
	ConditionReasonRoleNotAllowed        = "RoleNotAllowed"
	ConditionReasonInstanceProfileFailed = "InstanceProfileCreationFailed"
)
