package disruption

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mitchellh/hashstructure/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption/internal/mirror"
)

// EC2NodeClass hash versions: what Karpenter writes to
// karpenter.k8s.aws/ec2nodeclass-hash-version next to each formula.
const (
	// EC2NodeClassHashVersionNoCA labels the hash of the spec and the
	// resolved AMI family only (karpenter-provider-aws before v1.12).
	EC2NodeClassHashVersionNoCA = "v4"
	// EC2NodeClassHashVersionCA labels the hash that also covers the
	// cluster CA bundle (v1.14.1 writes v1.EC2NodeClassHashVersion, "v5").
	EC2NodeClassHashVersionCA = v1.EC2NodeClassHashVersion
)

// hashOptions are the options Karpenter passes to hashstructure for both
// static-drift hashes (karpenter: pkg/apis/v1/nodepool.go Hash; aws:
// pkg/apis/v1/ec2nodeclass.go Hash). A new value per call: hashstructure
// writes to it.
func hashOptions() *hashstructure.HashOptions {
	return &hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true}
}

// NodePoolHash returns the value Karpenter v1.14.1 writes to the
// karpenter.sh/nodepool-hash annotation for np, to be compared only with
// hashes of version v1.NodePoolHashVersion ("v3"): hashstructure v2
// (FormatV2; SlicesAsSets, IgnoreZeroValue, ZeroNil) of spec.template
// without its requirements, as a decimal string.
//
// The template is hashed as the API server stores it, with Karpenter's CRD
// default expireAfter 720h applied to a copy; np is not changed. Only
// template labels, annotations, taints, startupTaints, nodeClassRef,
// expireAfter and terminationGracePeriod count: weight, limits and
// disruption are outside the template and never change it. As in Karpenter,
// an empty list or map ("taints: []") hashes differently from an absent
// one. The error is hashstructure's and does not occur for decoded objects.
func NodePoolHash(np *v1.NodePool) (string, error) {
	t := np.Spec.Template // a copy: the default below stays local
	if !t.Spec.ExpireAfter.IsSet() {
		t.Spec.ExpireAfter = v1.MustParseNillable(v1.DefaultExpireAfter)
	}
	m := mirror.NodeClaimTemplate{
		ObjectMeta: mirror.ObjectMeta{Labels: t.ObjectMeta.Labels, Annotations: t.ObjectMeta.Annotations},
		Spec: mirror.NodeClaimTemplateSpec{
			Taints:        t.Spec.Taints,
			StartupTaints: t.Spec.StartupTaints,
			ExpireAfter:   mirror.NillableDuration{Duration: t.Spec.ExpireAfter.Duration},
		},
	}
	if ref := t.Spec.NodeClassRef; ref != nil {
		m.Spec.NodeClassRef = &mirror.NodeClassReference{Kind: ref.Kind, Name: ref.Name, Group: ref.Group}
	}
	if tgp := t.Spec.TerminationGracePeriod; tgp != nil {
		m.Spec.TerminationGracePeriod = &metav1.Duration{Duration: tgp.Duration}
	}
	h, err := hashstructure.Hash(m, hashstructure.FormatV2, hashOptions())
	if err != nil {
		return "", fmt.Errorf("hash nodepool %s: %w", np.Name, err)
	}
	return strconv.FormatUint(h, 10), nil
}

// EC2NodeClassHash returns the value karpenter-provider-aws writes to the
// karpenter.k8s.aws/ec2nodeclass-hash annotation for nc, and the hash
// version to compare it under. It is hashstructure v2 (as for NodePoolHash)
// of the set {spec without its `hash:"ignore"` fields, resolved AMI family}
// (aws: pkg/apis/v1/ec2nodeclass.go Hash): subnet, security-group,
// capacity-reservation and AMI selector terms, ipPrefixCount and the
// literal amiFamily do not count; userData, role, instanceProfile, tags,
// kubelet, blockDeviceMappings (volumeSize as a string),
// instanceStorePolicy, networkInterfaces, detailedMonitoring,
// metadataOptions, connectionTracking, context, cpuOptions,
// associatePublicIPAddress and placementGroupSelector do. The resolved
// family is spec.amiFamily, else the alias's family (al2023@latest →
// AL2023), else Custom.
//
// Without clusterCABundle the version is EC2NodeClassHashVersionNoCA, the
// formula Karpenter used before hashing the CA bundle. With one, the bundle
// joins the set as a string and the version is EC2NodeClassHashVersionCA,
// as karpenter-spec §7 states for v1.14.1. So a NodeClaim stamped by a
// Karpenter that hashed its CA is only compared when the CA is known, and
// adopted NodeClaims never drift merely because nodewright lacks it.
//
// The class is hashed as the API server stores it: Karpenter's CRD default
// metadataOptions are applied to a copy (SetDefaults); nc is not changed.
func EC2NodeClassHash(nc *v1.EC2NodeClass, clusterCABundle string) (hash, version string, err error) {
	c := *nc
	c.Spec.MetadataOptions = nil
	if m := nc.Spec.MetadataOptions; m != nil {
		mo := *m
		c.Spec.MetadataOptions = &mo
	}
	c.SetDefaults()
	set := []any{mirrorSpec(&c.Spec), resolvedFamily(&c)}
	version = EC2NodeClassHashVersionNoCA
	if clusterCABundle != "" {
		set = append(set, clusterCABundle)
		version = EC2NodeClassHashVersionCA
	}
	h, err := hashstructure.Hash(set, hashstructure.FormatV2, hashOptions())
	if err != nil {
		return "", "", fmt.Errorf("hash ec2nodeclass %s: %w", nc.Name, err)
	}
	return strconv.FormatUint(h, 10), version, nil
}

// resolvedFamily is Karpenter's EC2NodeClass.AMIFamily(): spec.amiFamily
// first, then the alias family, else Custom (aws: pkg/apis/v1/
// ec2nodeclass.go). It differs from v1.EC2NodeClass.AMIFamily, which
// prefers the alias.
func resolvedFamily(nc *v1.EC2NodeClass) string {
	if nc.Spec.AMIFamily != nil {
		return *nc.Spec.AMIFamily
	}
	if alias := nc.Alias(); alias != "" {
		name, _, _ := strings.Cut(alias, "@")
		for _, f := range []string{v1.AMIFamilyAL2, v1.AMIFamilyAL2023, v1.AMIFamilyBottlerocket,
			v1.AMIFamilyWindows2019, v1.AMIFamilyWindows2022, v1.AMIFamilyWindows2025} {
			if strings.ToLower(f) == name {
				return f
			}
		}
	}
	return v1.AMIFamilyCustom
}

// mirrorSpec copies the hashed fields of s into Karpenter's shape, keeping
// nil and empty lists and maps apart (they hash differently).
func mirrorSpec(s *v1.EC2NodeClassSpec) mirror.EC2NodeClassSpec {
	m := mirror.EC2NodeClassSpec{
		AssociatePublicIPAddress: s.AssociatePublicIPAddress,
		UserData:                 s.UserData,
		Role:                     s.Role,
		InstanceProfile:          s.InstanceProfile,
		Tags:                     s.Tags,
		InstanceStorePolicy:      s.InstanceStorePolicy,
		DetailedMonitoring:       s.DetailedMonitoring,
		Context:                  s.Context,
	}
	if p := s.PlacementGroupSelector; p != nil {
		m.PlacementGroupSelector = &mirror.PlacementGroupSelector{Name: p.Name, ID: p.ID}
	}
	if k := s.Kubelet; k != nil {
		mk := &mirror.KubeletConfiguration{
			ClusterDNS: k.ClusterDNS, MaxPods: k.MaxPods, PodsPerCore: k.PodsPerCore,
			SystemReserved: k.SystemReserved, KubeReserved: k.KubeReserved,
			EvictionHard: k.EvictionHard, EvictionSoft: k.EvictionSoft,
			EvictionMaxPodGracePeriod:   k.EvictionMaxPodGracePeriod,
			ImageGCHighThresholdPercent: k.ImageGCHighThresholdPercent,
			ImageGCLowThresholdPercent:  k.ImageGCLowThresholdPercent,
			CPUCFSQuota:                 k.CPUCFSQuota,
		}
		if k.EvictionSoftGracePeriod != nil {
			mk.EvictionSoftGracePeriod = make(map[string]metav1.Duration, len(k.EvictionSoftGracePeriod))
			for name, d := range k.EvictionSoftGracePeriod {
				mk.EvictionSoftGracePeriod[name] = metav1.Duration{Duration: d.Duration}
			}
		}
		m.Kubelet = mk
	}
	if s.BlockDeviceMappings != nil {
		m.BlockDeviceMappings = make([]*mirror.BlockDeviceMapping, len(s.BlockDeviceMappings))
		for i, b := range s.BlockDeviceMappings {
			if b == nil {
				continue
			}
			mb := &mirror.BlockDeviceMapping{DeviceName: b.DeviceName, RootVolume: b.RootVolume}
			if e := b.EBS; e != nil {
				mb.EBS = &mirror.BlockDevice{
					DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS,
					KMSKeyID: e.KMSKeyID, SnapshotID: e.SnapshotID, Throughput: e.Throughput,
					VolumeInitializationRate: e.VolumeInitializationRate, VolumeSize: e.VolumeSize,
					VolumeType: e.VolumeType,
				}
			}
			m.BlockDeviceMappings[i] = mb
		}
	}
	if s.NetworkInterfaces != nil {
		m.NetworkInterfaces = make([]*mirror.NetworkInterface, len(s.NetworkInterfaces))
		for i, ni := range s.NetworkInterfaces {
			m.NetworkInterfaces[i] = &mirror.NetworkInterface{
				NetworkCardIndex: ni.NetworkCardIndex, DeviceIndex: ni.DeviceIndex, InterfaceType: ni.InterfaceType,
			}
		}
	}
	if o := s.MetadataOptions; o != nil {
		m.MetadataOptions = &mirror.MetadataOptions{
			HTTPEndpoint: o.HTTPEndpoint, HTTPProtocolIPv6: o.HTTPProtocolIPv6,
			HTTPPutResponseHopLimit: o.HTTPPutResponseHopLimit, HTTPTokens: o.HTTPTokens,
		}
	}
	if t := s.ConnectionTracking; t != nil {
		m.ConnectionTracking = &mirror.ConnectionTracking{
			TCPEstablishedTimeout: t.TCPEstablishedTimeout, UDPStreamTimeout: t.UDPStreamTimeout, UDPTimeout: t.UDPTimeout,
		}
	}
	if o := s.CPUOptions; o != nil {
		m.CPUOptions = &mirror.CPUOptions{NestedVirtualization: o.NestedVirtualization}
	}
	return m
}
