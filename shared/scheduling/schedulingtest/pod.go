package schedulingtest

import (
	"crypto/sha1"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Epoch is the creation time of every fixture unless a test sets another one,
// and the Now of every Input built here.
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// DefaultNamespace is the namespace of pods built without Namespace.
const DefaultNamespace = "default"

// UID returns the deterministic UID of the object kind/namespace/name: a
// name-based (version 5 layout) UUID over SHA-1, so that the same fixture
// always has the same UID and different objects never share one.
func UID(kind, namespace, name string) types.UID {
	h := sha1.Sum([]byte(kind + "/" + namespace + "/" + name))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
}

// PodOption changes a pod built by Pod.
type PodOption func(*corev1.Pod)

// Pod returns a pending pod named name in namespace "default" with one
// container "main" and no requests: phase Pending, condition
// PodScheduled=False/Unschedulable (what the kube-scheduler writes before
// Karpenter considers a pod, karpenter-spec §3.1), creation time Epoch and
// UID UID("Pod", namespace, name). Options apply in order; the UID is
// derived after them unless an option set one.
func Pod(name string, opts ...PodOption) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         DefaultNamespace,
			CreationTimestamp: metav1.NewTime(Epoch),
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{
				Type:   corev1.PodScheduled,
				Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable,
			}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	if p.UID == "" {
		p.UID = UID("Pod", p.Namespace, p.Name)
	}
	return p
}

// Requests sets the cpu and memory requests of the first container; an empty
// string leaves that resource unset. It panics on a malformed quantity, which
// is a bug in the test.
func Requests(cpu, memory string) PodOption {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Resources.Requests = mergeList(c.Resources.Requests, list(cpu, memory))
	}
}

// Resources adds rl (e.g. nvidia.com/gpu) to the first container's requests.
func Resources(rl corev1.ResourceList) PodOption {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Resources.Requests = mergeList(c.Resources.Requests, rl)
	}
}

// Limits sets the cpu and memory limits of the first container.
func Limits(cpu, memory string) PodOption {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Resources.Limits = mergeList(c.Resources.Limits, list(cpu, memory))
	}
}

// Container appends a regular container with these cpu/memory requests.
func Container(name, cpu, memory string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: name, Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
			Resources: corev1.ResourceRequirements{Requests: list(cpu, memory)},
		})
	}
}

// InitContainer appends a run-to-completion init container with these
// cpu/memory requests.
func InitContainer(name, cpu, memory string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{
			Name: name, Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
			Resources: corev1.ResourceRequirements{Requests: list(cpu, memory)},
		})
	}
}

// Sidecar appends a restartable init container (restartPolicy Always, a
// native sidecar) with these cpu/memory requests.
func Sidecar(name, cpu, memory string) PodOption {
	return func(p *corev1.Pod) {
		always := corev1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{
			Name: name, Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
			RestartPolicy: &always,
			Resources:     corev1.ResourceRequirements{Requests: list(cpu, memory)},
		})
	}
}

// Overhead sets spec.overhead (the RuntimeClass overhead).
func Overhead(cpu, memory string) PodOption {
	return func(p *corev1.Pod) { p.Spec.Overhead = list(cpu, memory) }
}

// Namespace sets the namespace.
func Namespace(ns string) PodOption {
	return func(p *corev1.Pod) { p.Namespace = ns }
}

// Labels merges labels into the pod's labels.
func Labels(labels map[string]string) PodOption {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for k, v := range labels {
			p.Labels[k] = v
		}
	}
}

// NodeSelector merges selector into spec.nodeSelector.
func NodeSelector(selector map[string]string) PodOption {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for k, v := range selector {
			p.Spec.NodeSelector[k] = v
		}
	}
}

// Toleration appends a toleration: operator Equal when value is non-empty,
// Exists otherwise; an empty key with Exists tolerates every taint.
func Toleration(key, value string, effect corev1.TaintEffect) PodOption {
	return func(p *corev1.Pod) {
		t := corev1.Toleration{Key: key, Value: value, Effect: effect, Operator: corev1.TolerationOpEqual}
		if value == "" {
			t.Operator = corev1.TolerationOpExists
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, t)
	}
}

// In builds an In node selector requirement; In, NotIn, Exists,
// DoesNotExist, Gt and Lt build the requirements for Term.
func In(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

// NotIn builds a NotIn node selector requirement.
func NotIn(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: values}
}

// Exists builds an Exists node selector requirement.
func Exists(key string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpExists}
}

// DoesNotExist builds a DoesNotExist node selector requirement.
func DoesNotExist(key string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpDoesNotExist}
}

// Gt builds a Gt node selector requirement.
func Gt(key string, value int) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpGt, Values: []string{fmt.Sprint(value)}}
}

// Lt builds a Lt node selector requirement.
func Lt(key string, value int) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpLt, Values: []string{fmt.Sprint(value)}}
}

// Term is a node selector term: the AND of reqs.
func Term(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

// RequiredNodeAffinity appends terms to the required node affinity; terms
// are ORed, as in Kubernetes.
func RequiredNodeAffinity(terms ...corev1.NodeSelectorTerm) PodOption {
	return func(p *corev1.Pod) {
		na := nodeAffinity(p)
		if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
		}
		r := na.RequiredDuringSchedulingIgnoredDuringExecution
		r.NodeSelectorTerms = append(r.NodeSelectorTerms, terms...)
	}
}

// PreferredNodeAffinity appends a weighted preferred node-affinity term.
func PreferredNodeAffinity(weight int32, term corev1.NodeSelectorTerm) PodOption {
	return func(p *corev1.Pod) {
		na := nodeAffinity(p)
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: term})
	}
}

// PodAffinity appends a required pod-affinity term: the pod must share the
// topologyKey domain with a pod matching selector (matchLabels).
func PodAffinity(topologyKey string, selector map[string]string) PodOption {
	return func(p *corev1.Pod) {
		pa := podAffinity(p)
		pa.RequiredDuringSchedulingIgnoredDuringExecution = append(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			affinityTerm(topologyKey, selector))
	}
}

// PreferredPodAffinity appends a weighted preferred pod-affinity term.
func PreferredPodAffinity(weight int32, topologyKey string, selector map[string]string) PodOption {
	return func(p *corev1.Pod) {
		pa := podAffinity(p)
		pa.PreferredDuringSchedulingIgnoredDuringExecution = append(pa.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: affinityTerm(topologyKey, selector)})
	}
}

// PodAntiAffinity appends a required pod-anti-affinity term: no pod matching
// selector may share the topologyKey domain.
func PodAntiAffinity(topologyKey string, selector map[string]string) PodOption {
	return func(p *corev1.Pod) {
		pa := podAntiAffinity(p)
		pa.RequiredDuringSchedulingIgnoredDuringExecution = append(pa.RequiredDuringSchedulingIgnoredDuringExecution,
			affinityTerm(topologyKey, selector))
	}
}

// PreferredPodAntiAffinity appends a weighted preferred pod-anti-affinity term.
func PreferredPodAntiAffinity(weight int32, topologyKey string, selector map[string]string) PodOption {
	return func(p *corev1.Pod) {
		pa := podAntiAffinity(p)
		pa.PreferredDuringSchedulingIgnoredDuringExecution = append(pa.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: affinityTerm(topologyKey, selector)})
	}
}

// TopologySpread appends a topology spread constraint over topologyKey with
// maxSkew, whenUnsatisfiable and a matchLabels selector.
func TopologySpread(topologyKey string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, selector map[string]string) PodOption {
	return SpreadConstraint(corev1.TopologySpreadConstraint{
		MaxSkew:           maxSkew,
		TopologyKey:       topologyKey,
		WhenUnsatisfiable: when,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: selector},
	})
}

// SpreadConstraint appends tsc as is (for minDomains, node policies, ...).
func SpreadConstraint(tsc corev1.TopologySpreadConstraint) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, tsc)
	}
}

// HostPort adds a container port of the first container bound to the host
// port on all addresses.
func HostPort(port int32, protocol corev1.Protocol) PodOption {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: protocol})
	}
}

// BoundTo binds the pod to nodeName: spec.nodeName set, phase Running,
// PodScheduled=True.
func BoundTo(nodeName string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.NodeName = nodeName
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	}
}

// OwnedBy sets a controller owner reference (e.g. "DaemonSet", "ds-name");
// the owner's UID is UID(kind, pod namespace, name).
func OwnedBy(apiVersion, kind, name string) PodOption {
	return func(p *corev1.Pod) {
		controller := true
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{
			APIVersion: apiVersion, Kind: kind, Name: name, UID: UID(kind, p.Namespace, name), Controller: &controller,
		})
	}
}

// CreatedAt sets the creation timestamp.
func CreatedAt(t time.Time) PodOption {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

func nodeAffinity(p *corev1.Pod) *corev1.NodeAffinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	return p.Spec.Affinity.NodeAffinity
}

func podAffinity(p *corev1.Pod) *corev1.PodAffinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.PodAffinity == nil {
		p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{}
	}
	return p.Spec.Affinity.PodAffinity
}

func podAntiAffinity(p *corev1.Pod) *corev1.PodAntiAffinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.PodAntiAffinity == nil {
		p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	return p.Spec.Affinity.PodAntiAffinity
}

func affinityTerm(topologyKey string, selector map[string]string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{
		TopologyKey:   topologyKey,
		LabelSelector: &metav1.LabelSelector{MatchLabels: selector},
	}
}

// list builds a cpu/memory ResourceList; empty strings are skipped.
func list(cpu, memory string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	if cpu != "" {
		rl[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		rl[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return rl
}

func mergeList(dst, src corev1.ResourceList) corev1.ResourceList {
	if dst == nil {
		dst = corev1.ResourceList{}
	}
	for k, v := range src {
		dst[k] = v.DeepCopy()
	}
	return dst
}
