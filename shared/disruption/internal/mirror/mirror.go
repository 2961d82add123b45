// Package mirror holds Go types shaped like Karpenter's API structs, field
// for field, so that github.com/mitchellh/hashstructure/v2 computes the same
// static-drift hashes Karpenter computes. hashstructure mixes in every struct's
// type name and every included field's Go name, and combines a struct's
// fields in declaration order (each included field ends with a finishing
// hash), so the type names, field names, field order, field kinds and
// `hash:"ignore"`/`hash:"string"` tags below must match Karpenter's exactly;
// JSON tags and comments play no part and are omitted.
//
// Sources: karpenter v1.14.1 pkg/apis/v1/nodepool.go (NodeClaimTemplate,
// ObjectMeta, NodeClaimTemplateSpec), nodeclaim.go (NodeClassReference),
// duration.go (NillableDuration: an embedded *time.Duration plus Raw
// []byte `hash:"ignore"`); karpenter-provider-aws v1.14.1
// pkg/apis/v1/ec2nodeclass.go (EC2NodeClassSpec and the types it holds).
// Selector terms and the other fields Karpenter tags `hash:"ignore"` are
// not mirrored: an ignored field never reaches the hash, so leaving it out
// is equivalent.
package mirror

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaimTemplate mirrors karpenter.sh/v1 NodeClaimTemplate (the embedded
// ObjectMeta has field name "ObjectMeta").
type NodeClaimTemplate struct {
	ObjectMeta ObjectMeta
	Spec       NodeClaimTemplateSpec
}

// ObjectMeta mirrors Karpenter's template metadata.
type ObjectMeta struct {
	Labels      map[string]string
	Annotations map[string]string
}

// NodeClaimTemplateSpec mirrors karpenter.sh/v1 NodeClaimTemplateSpec.
// Requirements is `hash:"ignore"` in Karpenter (requirements drift is
// evaluated dynamically) and is omitted here.
type NodeClaimTemplateSpec struct {
	Taints                 []corev1.Taint
	StartupTaints          []corev1.Taint
	NodeClassRef           *NodeClassReference
	TerminationGracePeriod *metav1.Duration
	ExpireAfter            NillableDuration
}

// NodeClassReference mirrors karpenter.sh/v1 NodeClassReference.
type NodeClassReference struct {
	Kind  string
	Name  string
	Group string
}

// NillableDuration mirrors karpenter.sh/v1 NillableDuration: the embedded
// *time.Duration is a field named "Duration"; Raw is `hash:"ignore"` and is
// only ever set together with Duration, so "Never" (nil Duration) is the
// zero value in both.
type NillableDuration struct {
	Duration *time.Duration
}

// EC2NodeClassSpec mirrors karpenter.k8s.aws/v1 EC2NodeClassSpec without
// its ignored fields (subnet, security-group, capacity-reservation and AMI
// selector terms, ipPrefixCount, amiFamily).
type EC2NodeClassSpec struct {
	PlacementGroupSelector   *PlacementGroupSelector
	AssociatePublicIPAddress *bool
	UserData                 *string
	Role                     string
	InstanceProfile          *string
	Tags                     map[string]string
	Kubelet                  *KubeletConfiguration
	BlockDeviceMappings      []*BlockDeviceMapping
	InstanceStorePolicy      *string
	NetworkInterfaces        []*NetworkInterface
	DetailedMonitoring       *bool
	MetadataOptions          *MetadataOptions
	ConnectionTracking       *ConnectionTracking
	Context                  *string
	CPUOptions               *CPUOptions
}

// PlacementGroupSelector mirrors the v1.11 placement-group selector.
type PlacementGroupSelector struct {
	Name string
	ID   string
}

// KubeletConfiguration mirrors the v1.14.1 typed spec.kubelet.
type KubeletConfiguration struct {
	ClusterDNS                  []string
	MaxPods                     *int32
	PodsPerCore                 *int32
	SystemReserved              map[string]string
	KubeReserved                map[string]string
	EvictionHard                map[string]string
	EvictionSoft                map[string]string
	EvictionSoftGracePeriod     map[string]metav1.Duration
	EvictionMaxPodGracePeriod   *int32
	ImageGCHighThresholdPercent *int32
	ImageGCLowThresholdPercent  *int32
	CPUCFSQuota                 *bool
}

// BlockDeviceMapping mirrors karpenter.k8s.aws/v1 BlockDeviceMapping.
type BlockDeviceMapping struct {
	DeviceName *string
	EBS        *BlockDevice
	RootVolume bool
}

// BlockDevice mirrors karpenter.k8s.aws/v1 BlockDevice; VolumeSize is
// hashed through its String form, as Karpenter tags it.
type BlockDevice struct {
	DeleteOnTermination      *bool
	Encrypted                *bool
	IOPS                     *int64
	KMSKeyID                 *string
	SnapshotID               *string
	Throughput               *int64
	VolumeInitializationRate *int32
	VolumeSize               *resource.Quantity `hash:"string"`
	VolumeType               *string
}

// NetworkInterface mirrors the v1.11 spec.networkInterfaces entry.
type NetworkInterface struct {
	NetworkCardIndex int32
	DeviceIndex      int32
	InterfaceType    string
}

// MetadataOptions mirrors karpenter.k8s.aws/v1 MetadataOptions.
type MetadataOptions struct {
	HTTPEndpoint            *string
	HTTPProtocolIPv6        *string
	HTTPPutResponseHopLimit *int64
	HTTPTokens              *string
}

// ConnectionTracking mirrors the v1.13 spec.connectionTracking.
type ConnectionTracking struct {
	TCPEstablishedTimeout *int32
	UDPStreamTimeout      *int32
	UDPTimeout            *int32
}

// CPUOptions mirrors the v1.13 spec.cpuOptions.
type CPUOptions struct {
	NestedVirtualization *string
}
