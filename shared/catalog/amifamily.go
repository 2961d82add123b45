package catalog

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// amiFamily holds what capacity and overhead depend on per AMI family
// (aws: pkg/providers/amifamily/{al2,al2023,bottlerocket,windows,custom}.go:
// DefaultBlockDeviceMappings, EphemeralBlockDevice, FeatureFlags).
type amiFamily struct {
	name string
	// ephemeralDevice is the device whose volume backs ephemeral-storage;
	// "" for Custom, whose device is unknown.
	ephemeralDevice string
	// defaultEphemeralGi is the size of the family's default volume on
	// ephemeralDevice (Custom: Karpenter's default EBS volume, 20Gi).
	defaultEphemeralGi int64
	// eniLimitedMemoryOverhead: kube-reserved memory uses the ENI-limited pod
	// count (0 reserved ENIs) rather than the pods capacity.
	eniLimitedMemoryOverhead bool
	// podsPerCore: kubelet.podsPerCore caps pods.
	podsPerCore bool
	// eniLimitedPodDensity: without kubelet.maxPods, pods are ENI-limited
	// (else 110).
	eniLimitedPodDensity bool
	// windowsBuild is node.kubernetes.io/windows-build; "" for Linux.
	windowsBuild string
}

// defaultPods is the pod capacity of families without ENI-limited density
// (aws: pkg/providers/instancetype/types.go pods).
const defaultPods = 110

// family returns the parameters of a spec.amiFamily value (exact match).
func family(name string) (amiFamily, bool) {
	switch name {
	case v1.AMIFamilyAL2, v1.AMIFamilyAL2023:
		return amiFamily{name: name, ephemeralDevice: "/dev/xvda", defaultEphemeralGi: 20,
			eniLimitedMemoryOverhead: true, podsPerCore: true, eniLimitedPodDensity: true}, true
	case v1.AMIFamilyBottlerocket:
		// The OS volume is /dev/xvda (4Gi); pods use /dev/xvdb.
		return amiFamily{name: name, ephemeralDevice: "/dev/xvdb", defaultEphemeralGi: 20,
			eniLimitedMemoryOverhead: false, podsPerCore: false, eniLimitedPodDensity: true}, true
	case v1.AMIFamilyCustom:
		return amiFamily{name: name, ephemeralDevice: "", defaultEphemeralGi: 20,
			eniLimitedMemoryOverhead: true, podsPerCore: true, eniLimitedPodDensity: true}, true
	case v1.AMIFamilyWindows2019:
		return windowsFamily(name, "10.0.17763"), true
	case v1.AMIFamilyWindows2022:
		return windowsFamily(name, "10.0.20348"), true
	case v1.AMIFamilyWindows2025:
		return windowsFamily(name, "10.0.26100"), true
	}
	return amiFamily{}, false
}

// windowsFamily returns a Windows family; builds per spec §1.4
// (node.kubernetes.io/windows-build).
func windowsFamily(name, build string) amiFamily {
	return amiFamily{name: name, ephemeralDevice: "/dev/sda1", defaultEphemeralGi: 50,
		eniLimitedMemoryOverhead: false, podsPerCore: true, eniLimitedPodDensity: false, windowsBuild: build}
}

// windows reports whether the family boots Windows nodes.
func (f amiFamily) windows() bool { return f.windowsBuild != "" }

// aliasFamily maps an alias family (al2, al2023, bottlerocket,
// windows2019/2022/2025; case-insensitive) to its parameters.
func aliasFamily(name string) (amiFamily, bool) {
	for _, n := range []string{v1.AMIFamilyAL2, v1.AMIFamilyAL2023, v1.AMIFamilyBottlerocket,
		v1.AMIFamilyWindows2019, v1.AMIFamilyWindows2022, v1.AMIFamilyWindows2025} {
		if strings.EqualFold(n, name) {
			return family(n)
		}
	}
	return amiFamily{}, false
}

// resolveFamily returns the node class's AMI family: spec.amiFamily when set,
// else the family of its alias term (aws: pkg/apis/v1/ec2nodeclass.go
// AMIFamily). Karpenter's CRD requires one of the two; so does Resolve.
func resolveFamily(nc *v1.EC2NodeClass) (amiFamily, error) {
	if nc.Spec.AMIFamily != nil {
		f, ok := family(*nc.Spec.AMIFamily)
		if !ok {
			return amiFamily{}, fmt.Errorf("spec.amiFamily %q: want AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022 or Windows2025", *nc.Spec.AMIFamily)
		}
		return f, nil
	}
	for i, term := range nc.Spec.AMISelectorTerms {
		if term.Alias == "" {
			continue
		}
		name, _, _ := strings.Cut(term.Alias, "@")
		f, ok := aliasFamily(name)
		if !ok {
			return amiFamily{}, fmt.Errorf("spec.amiSelectorTerms[%d].alias %q: unknown family %q", i, term.Alias, name)
		}
		return f, nil
	}
	return amiFamily{}, fmt.Errorf("spec.amiFamily: required unless an amiSelectorTerms alias names the family")
}

// gi returns n GiB as a BinarySI quantity.
func gi(n int64) resource.Quantity {
	return *resource.NewQuantity(n<<30, resource.BinarySI)
}
