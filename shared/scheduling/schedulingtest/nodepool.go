package schedulingtest

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// DefaultNodeClass is the EC2NodeClass name every NodePool built here refers
// to unless PoolNodeClass says otherwise.
const DefaultNodeClass = "default"

// NodePoolOption changes a NodePool built by NodePool. Any
// func(*v1.NodePool) is one.
type NodePoolOption func(*v1.NodePool)

// NodePool returns a karpenter.sh/v1 NodePool named name that refers to the
// EC2NodeClass "default", with no requirements, taints, limits or weight
// (Karpenter's test default) and UID UID("NodePool", "", name). Defaults of
// shared/apis/v1 are not applied.
func NodePool(name string, opts ...NodePoolOption) v1.NodePool {
	np := v1.NodePool{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.Group + "/v1", Kind: v1.KindNodePool},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: UID(v1.KindNodePool, "", name), CreationTimestamp: metav1.NewTime(Epoch),
		},
		Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{},
			NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: DefaultNodeClass},
		}}},
	}
	for _, o := range opts {
		o(&np)
	}
	return np
}

// PoolWeight sets spec.weight.
func PoolWeight(w int32) NodePoolOption {
	return func(np *v1.NodePool) { np.Spec.Weight = &w }
}

// PoolRequirement appends a template requirement (operators include Gte/Lte).
func PoolRequirement(key string, op corev1.NodeSelectorOperator, values ...string) NodePoolOption {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	}
}

// PoolRequirementMinValues appends a template requirement with minValues.
func PoolRequirementMinValues(minValues int, key string, op corev1.NodeSelectorOperator, values ...string) NodePoolOption {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values, MinValues: &minValues})
	}
}

// PoolTaint appends a template taint.
func PoolTaint(key, value string, effect corev1.TaintEffect) NodePoolOption {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// PoolStartupTaint appends a template startup taint.
func PoolStartupTaint(key, value string, effect corev1.TaintEffect) NodePoolOption {
	return func(np *v1.NodePool) {
		np.Spec.Template.Spec.StartupTaints = append(np.Spec.Template.Spec.StartupTaints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

// PoolLabels merges labels into spec.template.metadata.labels.
func PoolLabels(labels map[string]string) NodePoolOption {
	return func(np *v1.NodePool) {
		if np.Spec.Template.ObjectMeta.Labels == nil {
			np.Spec.Template.ObjectMeta.Labels = map[string]string{}
		}
		for k, v := range labels {
			np.Spec.Template.ObjectMeta.Labels[k] = v
		}
	}
}

// PoolLimits sets spec.limits from resource name / quantity pairs, e.g.
// PoolLimits("cpu", "10", "nodes", "3"). It panics on an odd count or a
// malformed quantity, which is a bug in the test.
func PoolLimits(pairs ...string) NodePoolOption {
	if len(pairs)%2 != 0 {
		panic("schedulingtest.PoolLimits: odd number of arguments")
	}
	return func(np *v1.NodePool) {
		if np.Spec.Limits == nil {
			np.Spec.Limits = v1.Limits{}
		}
		for i := 0; i < len(pairs); i += 2 {
			np.Spec.Limits[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
		}
	}
}

// PoolNodeClass points spec.template.spec.nodeClassRef at the EC2NodeClass name.
func PoolNodeClass(name string) NodePoolOption {
	return func(np *v1.NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = name }
}

// NodeClassOption changes an EC2NodeClass built by EC2NodeClass.
type NodeClassOption func(*v1.EC2NodeClass)

// EC2NodeClass returns an AL2023 (alias al2023@latest) EC2NodeClass named
// name with discovery-tag subnet and security-group selectors, role
// "KarpenterNodeRole-my-cluster", and resolved subnets (status.subnets) in
// us-east-1a, us-east-1b and us-east-1c unless ClassZones says otherwise.
func EC2NodeClass(name string, opts ...NodeClassOption) v1.EC2NodeClass {
	discovery := map[string]string{"karpenter.sh/discovery": "my-cluster"}
	nc := v1.EC2NodeClass{
		TypeMeta: metav1.TypeMeta{APIVersion: v1.AWSGroup + "/v1", Kind: v1.KindEC2NodeClass},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: UID(v1.KindEC2NodeClass, "", name), CreationTimestamp: metav1.NewTime(Epoch),
		},
		Spec: v1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: discovery}},
			SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: discovery}},
			AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "KarpenterNodeRole-my-cluster",
		},
	}
	ClassZones("us-east-1a", "us-east-1b", "us-east-1c")(&nc)
	for _, o := range opts {
		o(&nc)
	}
	return nc
}

// ClassZones replaces status.subnets with one subnet per zone
// ("subnet-<zone>").
func ClassZones(zones ...string) NodeClassOption {
	return func(nc *v1.EC2NodeClass) {
		nc.Status.Subnets = nil
		for _, z := range zones {
			nc.Status.Subnets = append(nc.Status.Subnets, v1.Subnet{ID: "subnet-" + z, Zone: z})
		}
	}
}

// DaemonSet returns an apps/v1 DaemonSet named name in kube-system whose pod
// template is Pod(name, podOpts...) (so Requests, Toleration,
// RequiredNodeAffinity, HostPort, ... all apply), with selector and template
// label app=name and UID UID("DaemonSet", "kube-system", name).
func DaemonSet(name string, podOpts ...PodOption) appsv1.DaemonSet {
	p := Pod(name, append([]PodOption{Namespace("kube-system"), Labels(map[string]string{"app": name})}, podOpts...)...)
	return appsv1.DaemonSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: p.Namespace, UID: UID("DaemonSet", p.Namespace, name),
			CreationTimestamp: metav1.NewTime(Epoch),
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: p.Spec},
		},
	}
}
