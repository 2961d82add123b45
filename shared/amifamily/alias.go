package amifamily

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// VersionLatest is the alias version that follows the newest release.
const VersionLatest = "latest"

// ErrUnsupportedAlias is returned (wrapped) for an alias the cluster version
// or family cannot use: al2 on Kubernetes 1.33 or later, windows2025 before
// 1.35, or a pinned Windows version (Karpenter's UnsupportedAlias reason,
// karpenter-spec §9.1 and §11.3 item 36).
var ErrUnsupportedAlias = errors.New("unsupported alias")

// Alias is a parsed amiSelectorTerms alias such as "al2023@v20240807".
type Alias struct {
	// Family is the family the alias names.
	Family Family
	// Version is VersionLatest or a pinned release ("v20240807", or a
	// Bottlerocket version such as "v1.20.3").
	Version string
}

// String renders the alias as a manifest writes it.
func (a Alias) String() string { return a.Family.aliasName() + "@" + a.Version }

// Latest reports whether the alias follows the newest release (its SSM
// parameter changes when AWS publishes an AMI).
func (a Alias) Latest() bool { return a.Version == VersionLatest }

// aliasPattern is the CRD's alias pattern (karpenter-spec §1.3), plus the
// 30-character limit.
var aliasPattern = regexp.MustCompile(`^[a-zA-Z0-9]+@.+$`)

// ParseAlias parses "family@version". The family is case-insensitive (al2,
// al2023, bottlerocket, windows2019, windows2022, windows2025; Custom has no
// alias). Errors: a malformed alias, an unknown family, or a Windows alias
// that is not @latest (wrapping ErrUnsupportedAlias).
func ParseAlias(s string) (Alias, error) {
	if len(s) > 30 || !aliasPattern.MatchString(s) {
		return Alias{}, fmt.Errorf("alias %q: want family@version, at most 30 characters", s)
	}
	name, version, _ := strings.Cut(s, "@")
	for _, f := range Families {
		if f == Custom || !strings.EqualFold(f.aliasName(), name) {
			continue
		}
		if f.Windows() && version != VersionLatest {
			return Alias{}, fmt.Errorf("alias %q: windows families accept only @latest: %w", s, ErrUnsupportedAlias)
		}
		return Alias{Family: f, Version: version}, nil
	}
	return Alias{}, fmt.Errorf("alias %q: unknown family %q, want al2, al2023, bottlerocket, windows2019, windows2022 or windows2025", s, name)
}

// Parameter is one SSM parameter an alias reads, and the instance types the
// image it names serves. One parameter may appear twice with different
// requirements when its image serves two variants (the AL2 GPU image serves
// NVIDIA and Neuron types; the Bottlerocket x86_64 image serves standard and
// Neuron types).
type Parameter struct {
	// Name is the full parameter name, e.g.
	// "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id".
	Name string
	// Requirements select the instance types the image serves: always
	// kubernetes.io/arch, plus the variant's GPU/accelerator keys (standard:
	// instance-gpu-count and instance-accelerator-count DoesNotExist;
	// nvidia: instance-gpu-count Exists; neuron: instance-accelerator-count
	// Exists) or the Windows os/build labels.
	Requirements []v1.NodeSelectorRequirementWithMinValues
}

// variant is an image flavour and the instance types it serves.
type variant string

const (
	standard variant = "standard"
	nvidia   variant = "nvidia"
	neuron   variant = "neuron"
)

// Parameters returns the SSM parameters behind the alias for a cluster at
// k8sVersion ("1.33"), in a fixed order (amd64 before arm64, standard before
// accelerated), following aws: pkg/providers/amifamily/{al2,al2023,
// bottlerocket,windows}.go (karpenter-spec §9.1). Missing parameters are the
// caller's to skip. Errors: a malformed k8sVersion, or ErrUnsupportedAlias
// for al2 on 1.33+ and windows2025 before 1.35.
func (a Alias) Parameters(k8sVersion string) ([]Parameter, error) {
	minor, err := parseMinor(k8sVersion)
	if err != nil {
		return nil, err
	}
	switch a.Family {
	case AL2:
		if minor >= 33 {
			return nil, fmt.Errorf("alias %s on Kubernetes %s: AL2 AMIs stop at 1.32: %w", a, k8sVersion, ErrUnsupportedAlias)
		}
		return a.al2(k8sVersion), nil
	case AL2023:
		return a.al2023(k8sVersion), nil
	case Bottlerocket:
		return a.bottlerocket(k8sVersion), nil
	case Windows2019, Windows2022, Windows2025:
		if a.Family == Windows2025 && minor < 35 {
			return nil, fmt.Errorf("alias %s on Kubernetes %s: Windows Server 2025 AMIs start at 1.35: %w", a, k8sVersion, ErrUnsupportedAlias)
		}
		if !a.Latest() {
			return nil, fmt.Errorf("alias %s: windows families accept only @latest: %w", a, ErrUnsupportedAlias)
		}
		return a.windows(k8sVersion), nil
	}
	return nil, fmt.Errorf("alias %s: family %q has no alias", a, a.Family)
}

// al2 follows the EKS-optimized AL2 parameter tree:
// /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2[-arm64|-gpu]/<release>/image_id.
func (a Alias) al2(k8s string) []Parameter {
	release := func(prefix string) string {
		if a.Latest() {
			return "recommended"
		}
		return prefix + "-" + k8s + "-" + a.Version
	}
	base := "/aws/service/eks/optimized-ami/" + k8s + "/"
	gpu := base + "amazon-linux-2-gpu/" + release("amazon-eks-gpu-node") + "/image_id"
	return []Parameter{
		{Name: base + "amazon-linux-2/" + release("amazon-eks-node") + "/image_id", Requirements: variantRequirements("amd64", standard)},
		{Name: gpu, Requirements: variantRequirements("amd64", nvidia)},
		{Name: gpu, Requirements: variantRequirements("amd64", neuron)},
		{Name: base + "amazon-linux-2-arm64/" + release("amazon-eks-arm64-node") + "/image_id", Requirements: variantRequirements("arm64", standard)},
	}
}

// al2023 follows /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/
// <arch>/<variant>/<release>/image_id; arm64 has no neuron variant.
func (a Alias) al2023(k8s string) []Parameter {
	var out []Parameter
	for _, arch := range []string{"amd64", "arm64"} {
		variants := []variant{standard, nvidia, neuron}
		if arch == "arm64" {
			variants = []variant{standard, nvidia}
		}
		for _, vr := range variants {
			release := "recommended"
			if !a.Latest() {
				release = "amazon-eks-node-al2023-" + ec2Arch(arch) + "-" + string(vr) + "-" + k8s + "-" + a.Version
			}
			out = append(out, Parameter{
				Name:         "/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2023/" + ec2Arch(arch) + "/" + string(vr) + "/" + release + "/image_id",
				Requirements: variantRequirements(arch, vr),
			})
		}
	}
	return out
}

// bottlerocket follows /aws/service/bottlerocket/aws-k8s-<k8s>[-nvidia]/
// <arch>/<version without "v" | latest>/image_id.
func (a Alias) bottlerocket(k8s string) []Parameter {
	version := strings.TrimPrefix(a.Version, "v")
	var out []Parameter
	for _, arch := range []string{"amd64", "arm64"} {
		std := "/aws/service/bottlerocket/aws-k8s-" + k8s + "/" + ec2Arch(arch) + "/" + version + "/image_id"
		out = append(out, Parameter{Name: std, Requirements: variantRequirements(arch, standard)})
		if arch == "amd64" {
			out = append(out, Parameter{Name: std, Requirements: variantRequirements(arch, neuron)})
		}
		out = append(out, Parameter{
			Name:         "/aws/service/bottlerocket/aws-k8s-" + k8s + "-nvidia/" + ec2Arch(arch) + "/" + version + "/image_id",
			Requirements: variantRequirements(arch, nvidia),
		})
	}
	return out
}

// windows follows /aws/service/ami-windows-latest/
// Windows_Server-<year>-English-Core-EKS_Optimized-<k8s>/image_id.
func (a Alias) windows(k8s string) []Parameter {
	year := strings.TrimPrefix(string(a.Family), "Windows")
	return []Parameter{{
		Name: "/aws/service/ami-windows-latest/Windows_Server-" + year + "-English-Core-EKS_Optimized-" + k8s + "/image_id",
		Requirements: []v1.NodeSelectorRequirementWithMinValues{
			{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
			{Key: v1.LabelOS, Operator: corev1.NodeSelectorOpIn, Values: []string{"windows"}},
			{Key: v1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{a.Family.WindowsBuild()}},
		},
	}}
}

// variantRequirements are the instance types an image of arch and variant
// serves (karpenter-spec §9.1 "Variant requirements").
func variantRequirements(arch string, vr variant) []v1.NodeSelectorRequirementWithMinValues {
	out := []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}
	switch vr {
	case standard:
		out = append(out,
			v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist},
			v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist})
	case nvidia:
		out = append(out, v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists})
	case neuron:
		out = append(out, v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpExists})
	}
	return out
}

// ImageRequirements are the requirements of an image found by id, name, tags
// or SSM parameter rather than by alias: its architecture only, since such
// images are not known to be GPU-aware (karpenter-spec §9.1). arch is the
// EC2 architecture ("x86_64", "arm64"); ok is false for other values.
func ImageRequirements(ec2Architecture string) (reqs []v1.NodeSelectorRequirementWithMinValues, ok bool) {
	arch, ok := KubeArch(ec2Architecture)
	if !ok {
		return nil, false
	}
	return []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}, true
}

// KubeArch maps an EC2 architecture to kubernetes.io/arch: x86_64 -> amd64,
// arm64 -> arm64 (and x86_64_mac/arm64_mac likewise). ok is false for any
// other value (i386).
func KubeArch(ec2Architecture string) (string, bool) {
	switch ec2Architecture {
	case "x86_64", "x86_64_mac":
		return "amd64", true
	case "arm64", "arm64_mac":
		return "arm64", true
	}
	return "", false
}

// ec2Arch maps kubernetes.io/arch to the name SSM paths use.
func ec2Arch(arch string) string {
	if arch == "amd64" {
		return "x86_64"
	}
	return arch
}

// parseMinor validates "1.N" and returns N.
func parseMinor(k8sVersion string) (int, error) {
	major, minor, ok := strings.Cut(k8sVersion, ".")
	if !ok || major != "1" {
		return 0, fmt.Errorf("kubernetes version %q: want 1.N, e.g. 1.33", k8sVersion)
	}
	n, err := strconv.Atoi(minor)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("kubernetes version %q: want 1.N, e.g. 1.33", k8sVersion)
	}
	return n, nil
}
