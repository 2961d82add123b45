package amifamily

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Options are the inputs of the user data of one launch-template group
// (karpenter-spec §9.2 "Common inputs").
type Options struct {
	// ClusterName is the EKS cluster name. Required except for Custom.
	ClusterName string
	// ClusterEndpoint is the API server URL, e.g. "https://ABC.gr7.us-east-1.eks.amazonaws.com".
	// Required except for Custom.
	ClusterEndpoint string
	// CABundle is the cluster CA as base64-encoded PEM, as DescribeCluster
	// returns it. Required except for Custom.
	CABundle string
	// ClusterCIDR is the service CIDR (DescribeCluster
	// kubernetesNetworkConfig.serviceIpv4Cidr or serviceIpv6Cidr). Required
	// for AL2023, whose nodeadm needs it; ignored by the other families.
	ClusterCIDR string
	// ClusterDNS is the kube-dns ClusterIP, used unless
	// Kubelet.ClusterDNS names one. Optional: the AMIs derive a default
	// from the service CIDR.
	ClusterDNS string
	// Kubelet is spec.kubelet; nil means none.
	Kubelet *v1.KubeletConfiguration
	// MaxPods is the group's pods capacity; always written (> 0).
	MaxPods int32
	// Labels are the node's labels: the NodeClaim's labels plus
	// karpenter.sh/capacity-type. Labels in the kubernetes.io and k8s.io
	// domains are dropped (the kubelet may not set most of them; they are
	// synced at registration instead) and karpenter.sh/do-not-sync-taints=true
	// is added, except for Custom, which ignores Labels.
	Labels map[string]string
	// Taints are the NodeClaim's taints followed by its startup taints; the
	// karpenter.sh/unregistered:NoExecute taint is always added (once).
	Taints []corev1.Taint
	// InstanceStorePolicy is spec.instanceStorePolicy; "RAID0" asks the AMI
	// to stripe the NVMe instance stores.
	InstanceStorePolicy *string
	// UserData is spec.userData; nil means none. Its format depends on the
	// family (see UserData).
	UserData *string
}

// ErrInvalidUserData is returned (wrapped) when spec.userData cannot be
// merged: an AL2023 or AL2 MIME archive that does not parse, or Bottlerocket
// TOML that does not parse.
var ErrInvalidUserData = errors.New("invalid user data")

// UserData renders the user data (not base64-encoded) that joins an instance
// of family f to the cluster (karpenter-spec §9.2):
//   - AL2023: a MIME multipart archive (boundary "//") holding the user's
//     parts first (a MIME archive's parts, a NodeConfig YAML document as
//     application/node.eks.aws, or anything else as a shell script) and then
//     a nodeadm NodeConfig with the cluster, kubelet config
//     (registerWithTaints, maxPods, spec.kubelet) and --node-labels.
//   - AL2: the same archive shape with a /etc/eks/bootstrap.sh call last.
//   - Bottlerocket: the user's TOML with settings.kubernetes overridden by
//     ours (node-labels and node-taints merged).
//   - Windows: a <powershell> block, the user's script first, then
//     Start-EKSBootstrap.ps1.
//   - Custom: UserData verbatim ("" when nil); nothing is injected.
//
// Carriage returns in UserData are dropped for AL2, AL2023 and Windows. Errors name the
// missing option or wrap ErrInvalidUserData.
func (f Family) UserData(o Options) (string, error) {
	if f == Custom {
		if o.UserData == nil {
			return "", nil
		}
		return *o.UserData, nil
	}
	if err := o.validate(f); err != nil {
		return "", err
	}
	switch f {
	case AL2023:
		return nodeadm(o)
	case AL2:
		return bootstrapScript(o)
	case Bottlerocket:
		return bottlerocketTOML(o)
	case Windows2019, Windows2022, Windows2025:
		return powershell(o), nil
	}
	return "", fmt.Errorf("ami family %q: no user data format", f)
}

func (o *Options) validate(f Family) error {
	switch {
	case o.ClusterName == "":
		return errors.New("user data: cluster name: required")
	case o.ClusterEndpoint == "":
		return errors.New("user data: cluster endpoint: required")
	case o.CABundle == "":
		return errors.New("user data: cluster CA bundle: required")
	case o.MaxPods <= 0:
		return fmt.Errorf("user data: max pods %d: must be positive", o.MaxPods)
	case f == AL2023 && o.ClusterCIDR == "":
		return errors.New("user data: cluster service CIDR: required by AL2023 (nodeadm)")
	}
	return nil
}

// nodeLabels returns the labels the kubelet registers with, sorted by key
// (spec §9.2, §9.5): o.Labels without the kubernetes.io and k8s.io domains,
// plus karpenter.sh/do-not-sync-taints=true.
func (o *Options) nodeLabels() [][2]string {
	l := make(map[string]string, len(o.Labels)+1)
	for k, v := range o.Labels {
		if !kubeletRestrictedDomain(k) {
			l[k] = v
		}
	}
	l[v1.LabelDoNotSyncTaints] = "true"
	out := make([][2]string, 0, len(l))
	for _, k := range slices.Sorted(maps.Keys(l)) {
		out = append(out, [2]string{k, l[k]})
	}
	return out
}

// kubeletRestrictedDomain reports whether a label key's domain is
// kubernetes.io or k8s.io (or a subdomain, e.g. node-restriction.kubernetes.io).
func kubeletRestrictedDomain(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// registerTaints returns o.Taints deduplicated by (key, effect), first
// occurrence wins, with karpenter.sh/unregistered:NoExecute appended unless
// present.
func (o *Options) registerTaints() []corev1.Taint {
	out := make([]corev1.Taint, 0, len(o.Taints)+1)
	seen := map[[2]string]bool{}
	add := func(t corev1.Taint) {
		k := [2]string{t.Key, string(t.Effect)}
		if seen[k] {
			return
		}
		seen[k] = true
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	for _, t := range o.Taints {
		add(t)
	}
	add(corev1.Taint{Key: v1.TaintKeyUnregistered, Effect: corev1.TaintEffectNoExecute})
	return out
}

// clusterDNS returns the DNS IP the node uses: kubelet.clusterDNS[0], else
// o.ClusterDNS, else "".
func (o *Options) clusterDNS() string {
	if o.Kubelet != nil && len(o.Kubelet.ClusterDNS) > 0 {
		return o.Kubelet.ClusterDNS[0]
	}
	return o.ClusterDNS
}

// raid0 reports whether instance stores are striped.
func (o *Options) raid0() bool {
	return o.InstanceStorePolicy != nil && *o.InstanceStorePolicy == "RAID0"
}

// userData returns spec.userData with carriage returns removed, or "".
func (o *Options) userData() string {
	if o.UserData == nil {
		return ""
	}
	return strings.ReplaceAll(*o.UserData, "\r", "")
}

// taintFlag renders a taint as the kubelet flag does: key=value:Effect, or
// key:Effect without a value.
func taintFlag(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// kubeletArgs renders the kubelet flags bootstrap.sh and
// Start-EKSBootstrap.ps1 pass through (karpenter-spec §9.2 AL2 row):
// --node-labels, --register-with-taints, --max-pods, then spec.kubelet's
// fields in a fixed order, map entries sorted by key. No value contains
// whitespace (label, taint and kubelet values cannot), so none is quoted.
func (o *Options) kubeletArgs() string {
	var args []string
	labels := o.nodeLabels()
	pairs := make([]string, len(labels))
	for i, l := range labels {
		pairs[i] = l[0] + "=" + l[1]
	}
	args = append(args, "--node-labels="+strings.Join(pairs, ","))
	taints := o.registerTaints()
	flags := make([]string, len(taints))
	for i, t := range taints {
		flags[i] = taintFlag(t)
	}
	args = append(args, "--register-with-taints="+strings.Join(flags, ","))
	args = append(args, "--max-pods="+strconv.Itoa(int(o.MaxPods)))
	k := o.Kubelet
	if k == nil {
		return strings.Join(args, " ")
	}
	if k.PodsPerCore != nil {
		args = append(args, "--pods-per-core="+strconv.Itoa(int(*k.PodsPerCore)))
	}
	mapFlag := func(name, sep string, m map[string]string) {
		if len(m) == 0 {
			return
		}
		var kv []string
		for _, key := range slices.Sorted(maps.Keys(m)) {
			kv = append(kv, key+sep+m[key])
		}
		args = append(args, "--"+name+"="+strings.Join(kv, ","))
	}
	mapFlag("system-reserved", "=", k.SystemReserved)
	mapFlag("kube-reserved", "=", k.KubeReserved)
	mapFlag("eviction-hard", "<", k.EvictionHard)
	mapFlag("eviction-soft", "<", k.EvictionSoft)
	mapFlag("eviction-soft-grace-period", "=", durations(k.EvictionSoftGracePeriod))
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, "--eviction-max-pod-grace-period="+strconv.Itoa(int(*k.EvictionMaxPodGracePeriod)))
	}
	if k.ImageGCHighThresholdPercent != nil {
		args = append(args, "--image-gc-high-threshold="+strconv.Itoa(int(*k.ImageGCHighThresholdPercent)))
	}
	if k.ImageGCLowThresholdPercent != nil {
		args = append(args, "--image-gc-low-threshold="+strconv.Itoa(int(*k.ImageGCLowThresholdPercent)))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, "--cpu-cfs-quota="+strconv.FormatBool(*k.CPUCFSQuota))
	}
	return strings.Join(args, " ")
}

// durations renders duration values as written in the manifest.
func durations(m map[string]v1.Duration) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, d := range m {
		out[k] = d.String()
	}
	return out
}

// shellQuote quotes s as one POSIX shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// psQuote quotes s as a PowerShell single-quoted string.
func psQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
