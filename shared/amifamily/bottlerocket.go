package amifamily

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/BurntSushi/toml"
)

// bottlerocketTOML renders Bottlerocket user data (karpenter-spec §9.2
// Bottlerocket row; keys per the Bottlerocket settings reference): the
// user's TOML with settings.kubernetes.{cluster-name, api-server,
// cluster-certificate, cluster-dns-ip, max-pods} and the spec.kubelet keys
// set by nodewright, node-labels merged (ours win on a shared key), and
// node-taints merged (ours appended to the user's values for a key). With
// instanceStorePolicy RAID0, settings.bootstrap-commands gets
// "000-mount-instance-storage". Output keys are sorted.
func bottlerocketTOML(o Options) (string, error) {
	doc := map[string]any{}
	if data := o.userDataTOML(); data != "" {
		if _, err := toml.Decode(data, &doc); err != nil {
			return "", fmt.Errorf("user data: TOML: %w: %w", err, ErrInvalidUserData)
		}
	}
	settings, err := table(doc, "settings")
	if err != nil {
		return "", err
	}
	k8s, err := table(settings, "kubernetes")
	if err != nil {
		return "", fmt.Errorf("settings: %w", err)
	}
	k8s["cluster-name"] = o.ClusterName
	k8s["api-server"] = o.ClusterEndpoint
	k8s["cluster-certificate"] = o.CABundle
	k8s["max-pods"] = int64(o.MaxPods)
	if dns := o.clusterDNS(); dns != "" {
		k8s["cluster-dns-ip"] = dns
	}
	labels, err := table(k8s, "node-labels")
	if err != nil {
		return "", fmt.Errorf("settings.kubernetes: %w", err)
	}
	for _, l := range o.nodeLabels() {
		labels[l[0]] = l[1]
	}
	taints, err := table(k8s, "node-taints")
	if err != nil {
		return "", fmt.Errorf("settings.kubernetes: %w", err)
	}
	for _, t := range o.registerTaints() {
		v := t.Value + ":" + string(t.Effect)
		var values []any
		switch cur := taints[t.Key].(type) {
		case nil:
		case []any:
			values = cur
		case string:
			values = []any{cur}
		default:
			return "", fmt.Errorf("settings.kubernetes.node-taints.%q: want an array of strings: %w", t.Key, ErrInvalidUserData)
		}
		if !slices.Contains(values, any(v)) {
			values = append(values, v)
		}
		taints[t.Key] = values
	}
	if k := o.Kubelet; k != nil {
		setTable := func(name string, m map[string]string) {
			if len(m) > 0 {
				t := make(map[string]any, len(m))
				for key, v := range m {
					t[key] = v
				}
				k8s[name] = t
			}
		}
		setTable("system-reserved", k.SystemReserved)
		setTable("kube-reserved", k.KubeReserved)
		setTable("eviction-hard", k.EvictionHard)
		setTable("eviction-soft", k.EvictionSoft)
		setTable("eviction-soft-grace-period", durations(k.EvictionSoftGracePeriod))
		if k.EvictionMaxPodGracePeriod != nil {
			k8s["eviction-max-pod-grace-period"] = int64(*k.EvictionMaxPodGracePeriod)
		}
		if k.ImageGCHighThresholdPercent != nil {
			k8s["image-gc-high-threshold-percent"] = int64(*k.ImageGCHighThresholdPercent)
		}
		if k.ImageGCLowThresholdPercent != nil {
			k8s["image-gc-low-threshold-percent"] = int64(*k.ImageGCLowThresholdPercent)
		}
		if k.CPUCFSQuota != nil {
			k8s["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
		}
	}
	if o.raid0() {
		cmds, err := table(settings, "bootstrap-commands")
		if err != nil {
			return "", fmt.Errorf("settings: %w", err)
		}
		cmds["000-mount-instance-storage"] = map[string]any{
			"commands": []any{
				[]any{"apiclient", "ephemeral-storage", "init"},
				[]any{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"},
			},
			"essential": true,
			"mode":      "always",
		}
	}
	var buf bytes.Buffer
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(doc); err != nil {
		return "", fmt.Errorf("user data: TOML: %w", err)
	}
	return buf.String(), nil
}

// userDataTOML returns spec.userData or "".
func (o *Options) userDataTOML() string {
	if o.UserData == nil {
		return ""
	}
	return *o.UserData
}

// table returns parent[name] as a table, creating it when absent. A
// non-table value is an error wrapping ErrInvalidUserData.
func table(parent map[string]any, name string) (map[string]any, error) {
	switch v := parent[name].(type) {
	case nil:
		t := map[string]any{}
		parent[name] = t
		return t, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("%s: want a table, got %T: %w", name, v, ErrInvalidUserData)
	}
}
