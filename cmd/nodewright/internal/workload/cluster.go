package workload

import (
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/manifest"
	"github.com/nodewright/nodewright/shared/scheduling"
)

// annotationMirrorPod marks a static pod's mirror (kubernetes:
// pkg/kubelet/types ConfigMirrorAnnotationKey).
const annotationMirrorPod = "kubernetes.io/config.mirror"

// Cluster is the snapshot built from a set of manifests.
type Cluster struct {
	// NodePools and NodeClasses are as read: neither defaulted nor validated.
	NodePools   []v1.NodePool
	NodeClasses []v1.EC2NodeClass
	// Sources maps "<Kind>/<name>" of each NodePool and EC2NodeClass to the
	// manifest document it came from.
	Sources map[string]string
	// Pending are the pods to place, in manifest order: unbound pods that
	// are not DaemonSet or mirror pods, not terminal, not being deleted, not
	// gated, and either have no PodScheduled condition or have it False with
	// reason Unschedulable; the pods the controllers would create; and the
	// reschedulable pods of nodes being deleted.
	Pending []*corev1.Pod
	// Nodes are registered Nodes (with their NodeClaim when one names them)
	// and in-flight NodeClaims, with the pods bound or nominated to them.
	Nodes []scheduling.ExistingNode
	// DaemonSets contribute per-node overhead.
	DaemonSets []appsv1.DaemonSet
	// Nodes carry the attach limits of the CSINode named like them
	// (ExistingNode.VolumeLimits).
	// Volumes are the PersistentVolumeClaims, PersistentVolumes and
	// StorageClasses read, plus the claims the StatefulSets'
	// volumeClaimTemplates would create (unbound, of the template's
	// class) where the manifests hold none of that name.
	Volumes scheduling.Volumes
	// PodDisruptionBudgets are read for completeness; planning does not use
	// them (they matter to disruption, not to provisioning).
	PodDisruptionBudgets []policyv1.PodDisruptionBudget
	// Ignored lists objects that were read but play no part in the plan,
	// with the reason.
	Ignored []Note
}

// Note is an object left out of the plan and why.
type Note struct {
	Object string `json:"object"` // "<Kind> <namespace>/<name>"
	Reason string `json:"reason"`
	// Source is the manifest document the object came from ("<path>#<n>",
	// as manifest.Object.Source).
	Source string `json:"source"`
}

// Build assembles a Cluster from objects. It fails when two objects of the
// same kind share a namespace/name; everything else that cannot take part
// in the plan (kinds nodewright does not plan with, terminal pods, pods
// bound to unknown nodes, DaemonSet pods that are not running) is listed
// in Ignored.
func Build(objs []manifest.Object) (*Cluster, error) {
	c := &Cluster{Sources: map[string]string{}}
	seen := map[string]string{}
	var errs []error
	var pods []*corev1.Pod
	podSources := map[*corev1.Pod]string{}
	var workloads []manifest.Object
	var csiNodes []manifest.Object
	for _, o := range objs {
		if p, ok := o.Typed.(*corev1.Pod); ok && p.Name == "" && p.GenerateName != "" {
			p = p.DeepCopy()
			p.Name = GeneratedName(p.GenerateName, o.Source)
			o.Typed, o.Name = p, p.Name
		}
		if o.Typed != nil {
			var problems []fieldProblem
			if o.Name == "" {
				problems = append(problems, fieldProblem{"metadata.name", "required (or metadata.generateName for a Pod)"})
			}
			problems = append(problems, checkObject(o.Typed)...)
			for _, p := range problems {
				errs = append(errs, fmt.Errorf("%s: %s %q: %s: %s", o.Source, o.Kind, qualified(o.Namespace, o.Name), p.path, p.msg))
			}
			if len(problems) > 0 {
				continue
			}
		}
		id := o.Kind + " " + o.Namespace + "/" + o.Name
		if o.Typed != nil {
			if prev, dup := seen[id]; dup {
				errs = append(errs, fmt.Errorf("%s: %s %q: duplicate of %s", o.Source, o.Kind, qualified(o.Namespace, o.Name), prev))
				continue
			}
			seen[id] = o.Source
		}
		switch t := o.Typed.(type) {
		case *v1.NodePool:
			c.NodePools = append(c.NodePools, *t)
			c.Sources[v1.KindNodePool+"/"+t.Name] = o.Source
		case *v1.EC2NodeClass:
			c.NodeClasses = append(c.NodeClasses, *t)
			c.Sources[v1.KindEC2NodeClass+"/"+t.Name] = o.Source
		case *corev1.Pod:
			pods = append(pods, t)
			podSources[t] = o.Source
		case *appsv1.DaemonSet:
			c.DaemonSets = append(c.DaemonSets, *t)
		case *policyv1.PodDisruptionBudget:
			c.PodDisruptionBudgets = append(c.PodDisruptionBudgets, *t)
		case *corev1.PersistentVolumeClaim:
			c.Volumes.Claims = append(c.Volumes.Claims, *t)
		case *corev1.PersistentVolume:
			c.Volumes.PersistentVolumes = append(c.Volumes.PersistentVolumes, *t)
		case *storagev1.StorageClass:
			c.Volumes.StorageClasses = append(c.Volumes.StorageClasses, *t)
		case *storagev1.CSINode:
			csiNodes = append(csiNodes, o)
		case *corev1.Node, *v1.NodeClaim:
			// handled below, once every object is known
		case *appsv1.Deployment, *appsv1.ReplicaSet, *appsv1.StatefulSet, *batchv1.Job:
			workloads = append(workloads, o)
		default:
			c.Ignored = append(c.Ignored, Note{Object: o.Kind + " " + qualified(o.Namespace, o.Name), Reason: "kind not used by plan", Source: o.Source})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	index := c.addNodes(objs)
	c.addVolumeLimits(csiNodes)
	c.placePods(pods, podSources, index)
	if err := c.expand(workloads, pods); err != nil {
		return nil, err
	}
	return c, nil
}

// addVolumeLimits gives each Node the attach limits of the CSINode of its
// name (v1.SummarizeCSINode); a CSINode without its Node is noted as
// ignored.
func (c *Cluster) addVolumeLimits(csiNodes []manifest.Object) {
	byName := map[string]int{}
	for i, n := range c.Nodes {
		if n.Node != nil {
			byName[n.Node.Name] = i
		}
	}
	for _, o := range csiNodes {
		sum := v1.SummarizeCSINode(o.Typed.(*storagev1.CSINode))
		i, ok := byName[sum.Name]
		if !ok {
			c.Ignored = append(c.Ignored, Note{Object: o.Kind + " " + sum.Name, Reason: "no Node of that name in the input", Source: o.Source})
			continue
		}
		c.Nodes[i].VolumeLimits = sum.Limits
	}
}

// addNodes adds Nodes and NodeClaims and returns an index from every name a
// pod may be bound to (Node name, NodeClaim name) to its entry.
func (c *Cluster) addNodes(objs []manifest.Object) map[string]int {
	index := map[string]int{}
	nodes := map[string]int{}
	byProvider := map[string]int{}
	for _, o := range objs {
		n, ok := o.Typed.(*corev1.Node)
		if !ok {
			continue
		}
		index[n.Name] = len(c.Nodes)
		nodes[n.Name] = len(c.Nodes)
		if n.Spec.ProviderID != "" {
			byProvider[n.Spec.ProviderID] = len(c.Nodes)
		}
		c.Nodes = append(c.Nodes, scheduling.ExistingNode{Node: n, MarkedForDeletion: n.DeletionTimestamp != nil})
	}
	for _, o := range objs {
		nc, ok := o.Typed.(*v1.NodeClaim)
		if !ok {
			continue
		}
		i, found := nodes[nc.Status.NodeName]
		if !found && nc.Status.ProviderID != "" {
			i, found = byProvider[nc.Status.ProviderID]
		}
		if found {
			c.Nodes[i].NodeClaim = nc
			c.Nodes[i].MarkedForDeletion = c.Nodes[i].MarkedForDeletion || nc.DeletionTimestamp != nil
			index[nc.Name] = i
			continue
		}
		index[nc.Name] = len(c.Nodes)
		c.Nodes = append(c.Nodes, scheduling.ExistingNode{NodeClaim: nc, MarkedForDeletion: nc.DeletionTimestamp != nil})
	}
	return index
}

// placePods sorts explicit pods into existing (bound or nominated) and
// pending.
func (c *Cluster) placePods(pods []*corev1.Pod, sources map[*corev1.Pod]string, index map[string]int) {
	for _, p := range pods {
		src := sources[p]
		if p.Namespace == "" {
			p = p.DeepCopy()
			p.Namespace = defaultNamespace
		}
		id := "Pod " + qualified(p.Namespace, p.Name)
		if p.UID == "" {
			p = p.DeepCopy()
			p.UID = UID("Pod", p.Namespace, p.Name)
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			c.Ignored = append(c.Ignored, Note{Object: id, Reason: "terminal phase " + string(p.Status.Phase), Source: src})
			continue
		}
		node := p.Spec.NodeName
		if node == "" {
			node = p.Status.NominatedNodeName
		}
		if node != "" {
			i, ok := index[node]
			if !ok {
				c.Ignored = append(c.Ignored, Note{Object: id, Reason: fmt.Sprintf("bound to node %q, which is not in the manifests", node), Source: src})
				continue
			}
			c.Nodes[i].Pods = append(c.Nodes[i].Pods, p)
			if c.Nodes[i].MarkedForDeletion && reschedulable(p) {
				moved := p.DeepCopy()
				moved.Spec.NodeName = ""
				moved.Status.NominatedNodeName = ""
				c.Pending = append(c.Pending, moved)
			}
			continue
		}
		switch {
		case ownerKind(p) == "DaemonSet":
			c.Ignored = append(c.Ignored, Note{Object: id, Reason: "DaemonSet pods never cause a launch", Source: src})
		case p.Annotations[annotationMirrorPod] != "":
			c.Ignored = append(c.Ignored, Note{Object: id, Reason: "mirror pods never cause a launch", Source: src})
		case p.DeletionTimestamp != nil:
			c.Ignored = append(c.Ignored, Note{Object: id, Reason: "pod is being deleted", Source: src})
		case len(p.Spec.SchedulingGates) > 0:
			c.Ignored = append(c.Ignored, Note{Object: id, Reason: "pod has scheduling gates", Source: src})
		case !unschedulableOrNew(p):
			c.Ignored = append(c.Ignored, Note{Object: id, Reason: "PodScheduled condition is not False/Unschedulable, so Karpenter would not provision for it", Source: src})
		default:
			c.Pending = append(c.Pending, p)
		}
	}
}

// expand adds the pods controllers would create, counting the explicit
// pods they already own. It fails, naming the workload, when the plan would
// hold more than MaxPods pods.
func (c *Cluster) expand(workloads []manifest.Object, pods []*corev1.Pod) error {
	total := len(c.Pending)
	for _, o := range workloads {
		var n int
		switch t := o.Typed.(type) {
		case *appsv1.Deployment:
			n = replicas(t.Spec.Replicas)
		case *appsv1.ReplicaSet:
			n = replicas(t.Spec.Replicas)
		case *appsv1.StatefulSet:
			n = replicas(t.Spec.Replicas)
		case *batchv1.Job:
			n = replicas(t.Spec.Parallelism)
		}
		if total+n > MaxPods {
			return fmt.Errorf("%s: %s %q: %d replicas would bring the plan to %d pods, over the limit of %d",
				o.Source, o.Kind, qualified(o.Namespace, o.Name), n, total+n, MaxPods)
		}
		total += n
	}
	deployments := map[string]bool{}
	for _, o := range workloads {
		if d, ok := o.Typed.(*appsv1.Deployment); ok {
			deployments[namespaceOf(&d.ObjectMeta)+"/"+d.Name] = true
		}
	}
	for _, o := range workloads {
		switch t := o.Typed.(type) {
		case *appsv1.Deployment:
			ns := namespaceOf(&t.ObjectMeta)
			have := count(pods, ns, func(p *corev1.Pod) bool {
				name, kind := ownerName(p)
				return kind == "ReplicaSet" && strings.HasPrefix(name, t.Name+"-") && selected(t.Spec.Selector, p)
			})
			c.Pending = append(c.Pending, DeploymentPods(t, have)...)
		case *appsv1.ReplicaSet:
			ns := namespaceOf(&t.ObjectMeta)
			if owner := metav1.GetControllerOf(t); owner != nil && owner.Kind == "Deployment" && deployments[ns+"/"+owner.Name] {
				c.Ignored = append(c.Ignored, Note{Object: "ReplicaSet " + qualified(ns, t.Name), Reason: "its Deployment " + owner.Name + " is expanded instead", Source: o.Source})
				continue
			}
			have := count(pods, ns, func(p *corev1.Pod) bool {
				name, kind := ownerName(p)
				return kind == "ReplicaSet" && name == t.Name
			})
			c.Pending = append(c.Pending, ReplicaSetPods(t, have)...)
		case *appsv1.StatefulSet:
			ns := namespaceOf(&t.ObjectMeta)
			existing := map[string]bool{}
			for _, p := range pods {
				if name, kind := ownerName(p); kind == "StatefulSet" && name == t.Name && namespaceOf(&p.ObjectMeta) == ns {
					existing[p.Name] = true
				}
			}
			c.Pending = append(c.Pending, StatefulSetPods(t, existing)...)
			c.addTemplateClaims(t)
		case *batchv1.Job:
			ns := namespaceOf(&t.ObjectMeta)
			have := count(pods, ns, func(p *corev1.Pod) bool {
				name, kind := ownerName(p)
				return kind == "Job" && name == t.Name && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
			})
			c.Pending = append(c.Pending, JobPods(t, have)...)
		}
	}
	return nil
}

// unschedulableOrNew reports whether an unbound pod is one Karpenter
// provisions for (karpenter-spec §3.1: PodScheduled=False with reason
// Unschedulable), or a pod written without a PodScheduled condition, which
// plan treats as about to be created and found unschedulable.
func unschedulableOrNew(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return true
}

// reschedulable reports whether a pod of a node being deleted must be
// placed again: not a DaemonSet pod, not a mirror pod, not terminal
// (karpenter-spec §3.7).
func reschedulable(p *corev1.Pod) bool {
	return ownerKind(p) != "DaemonSet" && p.Annotations[annotationMirrorPod] == "" &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

func ownerKind(p *corev1.Pod) string {
	_, kind := ownerName(p)
	return kind
}

func ownerName(p *corev1.Pod) (name, kind string) {
	if o := metav1.GetControllerOf(p); o != nil {
		return o.Name, o.Kind
	}
	return "", ""
}

func count(pods []*corev1.Pod, ns string, ok func(*corev1.Pod) bool) int {
	n := 0
	for _, p := range pods {
		if namespaceOf(&p.ObjectMeta) == ns && ok(p) {
			n++
		}
	}
	return n
}

func selected(sel *metav1.LabelSelector, p *corev1.Pod) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(p.Labels))
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// addTemplateClaims adds the claims a StatefulSet's volumeClaimTemplates
// would create for its replicas (<template>-<statefulset>-<i>, unbound, of
// the template's storageClassName), where no claim of that name was read.
func (c *Cluster) addTemplateClaims(s *appsv1.StatefulSet) {
	ns := namespaceOf(&s.ObjectMeta)
	have := map[string]bool{}
	for _, cl := range c.Volumes.Claims {
		have[namespaceOf(&cl.ObjectMeta)+"/"+cl.Name] = true
	}
	for i := range replicas(s.Spec.Replicas) {
		for _, t := range s.Spec.VolumeClaimTemplates {
			name := StatefulSetClaimName(t.Name, s.Name, i)
			if have[ns+"/"+name] {
				continue
			}
			c.Volumes.Claims = append(c.Volumes.Claims, corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       *t.Spec.DeepCopy(),
				Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
			})
		}
	}
}
