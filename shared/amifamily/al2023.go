package amifamily

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// nodeConfig is nodeadm's NodeConfig (node.eks.aws/v1alpha1), reduced to the
// fields nodewright writes; see the AL2023 "nodeadm" configuration
// reference.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster  nodeConfigCluster   `json:"cluster"`
	Instance *nodeConfigInstance `json:"instance,omitempty"`
	Kubelet  nodeConfigKubelet   `json:"kubelet"`
}

type nodeConfigCluster struct {
	Name                 string `json:"name"`
	APIServerEndpoint    string `json:"apiServerEndpoint"`
	CertificateAuthority string `json:"certificateAuthority"`
	CIDR                 string `json:"cidr"`
}

type nodeConfigInstance struct {
	LocalStorage nodeConfigLocalStorage `json:"localStorage"`
}

type nodeConfigLocalStorage struct {
	Strategy string `json:"strategy"`
}

type nodeConfigKubelet struct {
	// Config holds KubeletConfiguration (kubelet.config.k8s.io/v1beta1)
	// fields by their camelCase names.
	Config map[string]any `json:"config"`
	Flags  []string       `json:"flags,omitempty"`
}

// nodeConfigHeader opens nodewright's NodeConfig part.
const nodeConfigHeader = "# nodewright generated NodeConfig\n"

// nodeadm renders AL2023 user data (karpenter-spec §9.2 AL2023 row).
func nodeadm(o Options) (string, error) {
	parts, err := userParts(o.userData(), true)
	if err != nil {
		return "", err
	}
	cfg := nodeConfig{
		APIVersion: "node.eks.aws/v1alpha1",
		Kind:       "NodeConfig",
		Spec: nodeConfigSpec{
			Cluster: nodeConfigCluster{
				Name:                 o.ClusterName,
				APIServerEndpoint:    o.ClusterEndpoint,
				CertificateAuthority: o.CABundle,
				CIDR:                 o.ClusterCIDR,
			},
			Kubelet: nodeConfigKubelet{Config: o.kubeletConfig()},
		},
	}
	if o.raid0() {
		cfg.Spec.Instance = &nodeConfigInstance{LocalStorage: nodeConfigLocalStorage{Strategy: "RAID0"}}
	}
	labels := o.nodeLabels()
	pairs := make([]string, len(labels))
	for i, l := range labels {
		pairs[i] = l[0] + "=" + l[1]
	}
	cfg.Spec.Kubelet.Flags = []string{"--node-labels=" + strings.Join(pairs, ",")}
	doc, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("user data: NodeConfig: %w", err)
	}
	parts = append(parts, mimePart{
		headers: []string{"Content-Type: " + contentTypeNodeConfig},
		content: nodeConfigHeader + string(doc),
	})
	return renderMIME(parts), nil
}

// kubeletConfig returns the KubeletConfiguration fields nodeadm merges into
// the kubelet's config file: maxPods and registerWithTaints always,
// clusterDNS when known, and every spec.kubelet field that is set.
func (o *Options) kubeletConfig() map[string]any {
	taints := o.registerTaints()
	c := map[string]any{
		"maxPods":            o.MaxPods,
		"registerWithTaints": taints,
	}
	if dns := o.clusterDNS(); dns != "" {
		c["clusterDNS"] = []string{dns}
	}
	k := o.Kubelet
	if k == nil {
		return c
	}
	if len(k.ClusterDNS) > 0 {
		c["clusterDNS"] = slices.Clone(k.ClusterDNS)
	}
	setMap := func(name string, m map[string]string) {
		if len(m) > 0 {
			c[name] = maps.Clone(m)
		}
	}
	setMap("systemReserved", k.SystemReserved)
	setMap("kubeReserved", k.KubeReserved)
	setMap("evictionHard", k.EvictionHard)
	setMap("evictionSoft", k.EvictionSoft)
	setMap("evictionSoftGracePeriod", durations(k.EvictionSoftGracePeriod))
	if k.PodsPerCore != nil {
		c["podsPerCore"] = *k.PodsPerCore
	}
	if k.EvictionMaxPodGracePeriod != nil {
		c["evictionMaxPodGracePeriod"] = *k.EvictionMaxPodGracePeriod
	}
	if k.ImageGCHighThresholdPercent != nil {
		c["imageGCHighThresholdPercent"] = *k.ImageGCHighThresholdPercent
	}
	if k.ImageGCLowThresholdPercent != nil {
		c["imageGCLowThresholdPercent"] = *k.ImageGCLowThresholdPercent
	}
	if k.CPUCFSQuota != nil {
		c["cpuCFSQuota"] = *k.CPUCFSQuota
	}
	return c
}
