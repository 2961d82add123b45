// Package workload turns the objects of a set of manifests into the cluster
// snapshot the solver plans for: workload controllers (Deployment,
// ReplicaSet, StatefulSet, Job) are expanded into the pods their controllers
// would create, unbound pods become pending, bound pods and Nodes /
// NodeClaims become existing capacity.
//
// Expansion is deterministic: the same manifests always give the same pod
// names and UIDs, so plans can be compared and tested.
package workload

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

// Well-known labels the Kubernetes controllers put on the pods they create
// (kubernetes: pkg/controller/deployment, statefulset, job).
const (
	LabelPodTemplateHash  = "pod-template-hash"
	LabelStatefulSetPod   = "statefulset.kubernetes.io/pod-name"
	LabelPodIndex         = "apps.kubernetes.io/pod-index"
	LabelJobName          = "batch.kubernetes.io/job-name"
	LabelControllerUID    = "batch.kubernetes.io/controller-uid"
	AnnotationJobIndex    = "batch.kubernetes.io/job-completion-index"
	defaultNamespace      = "default"
	podKindUIDNamespacing = "Pod"
)

// UID is the deterministic UID given to an expanded object: a name-based
// UUID (version 5 layout, SHA-1) over kind/namespace/name.
func UID(kind, namespace, name string) types.UID {
	h := sha1.Sum([]byte(kind + "/" + namespace + "/" + name))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
}

// TemplateHash is the pod-template-hash of a pod template: FNV-32a over the
// template's JSON, written with Kubernetes' safe alphabet
// (apimachinery util/rand.SafeEncodeString). It has the shape of the hash
// the Deployment controller computes, not the same value (that one hashes a
// Go-specific dump of the object).
func TemplateHash(t *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t) // a PodTemplateSpec always marshals
	h := fnv.New32a()
	h.Write(b)
	return utilrand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// owner describes the controller a pod is created for.
type owner struct {
	apiVersion, kind, name, namespace string
	uid                               types.UID
}

// newPod builds pod name of namespace ns from template t, owned by o.
func newPod(t *corev1.PodTemplateSpec, ns, name string, o owner, extraLabels map[string]string) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: *t.ObjectMeta.DeepCopy(),
		Spec:       *t.Spec.DeepCopy(),
	}
	p.Name = name
	p.GenerateName = ""
	p.Namespace = ns
	p.UID = UID(podKindUIDNamespacing, ns, name)
	if len(extraLabels) > 0 && p.Labels == nil {
		p.Labels = map[string]string{}
	}
	for k, v := range extraLabels {
		p.Labels[k] = v
	}
	controller := true
	p.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: o.apiVersion, Kind: o.kind, Name: o.name, UID: o.uid, Controller: &controller,
	}}
	p.Status = corev1.PodStatus{
		Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		}},
	}
	return p
}

func namespaceOf(m *metav1.ObjectMeta) string {
	if m.Namespace == "" {
		return defaultNamespace
	}
	return m.Namespace
}

func uidOf(m *metav1.ObjectMeta, kind string) types.UID {
	if m.UID != "" {
		return m.UID
	}
	return UID(kind, namespaceOf(m), m.Name)
}

func replicas(r *int32) int {
	if r == nil {
		return 1
	}
	return max(int(*r), 0)
}

// DeploymentPods returns the pods of d's current ReplicaSet: spec.replicas
// (default 1) pods named <name>-<hash>-<i> for i from 0, where hash is
// TemplateHash of the template and also the pod-template-hash label, owned
// by ReplicaSet <name>-<hash>. have is the number of matching pods that
// already exist; only the missing replicas are returned. A paused
// Deployment still keeps its replicas.
func DeploymentPods(d *appsv1.Deployment, have int) []*corev1.Pod {
	hash := TemplateHash(&d.Spec.Template)
	ns := namespaceOf(&d.ObjectMeta)
	rs := d.Name + "-" + hash
	o := owner{apiVersion: "apps/v1", kind: "ReplicaSet", name: rs, namespace: ns, uid: UID("ReplicaSet", ns, rs)}
	var pods []*corev1.Pod
	for i := have; i < replicas(d.Spec.Replicas); i++ {
		pods = append(pods, newPod(&d.Spec.Template, ns, fmt.Sprintf("%s-%d", rs, i), o,
			map[string]string{LabelPodTemplateHash: hash}))
	}
	return pods
}

// ReplicaSetPods returns the missing replicas of rs (spec.replicas, default
// 1, minus have existing matching pods), named <name>-<hash>-<i> with hash
// the TemplateHash of its template.
func ReplicaSetPods(rs *appsv1.ReplicaSet, have int) []*corev1.Pod {
	hash := TemplateHash(&rs.Spec.Template)
	ns := namespaceOf(&rs.ObjectMeta)
	o := owner{apiVersion: "apps/v1", kind: "ReplicaSet", name: rs.Name, namespace: ns, uid: uidOf(&rs.ObjectMeta, "ReplicaSet")}
	var pods []*corev1.Pod
	for i := have; i < replicas(rs.Spec.Replicas); i++ {
		pods = append(pods, newPod(&rs.Spec.Template, ns, fmt.Sprintf("%s-%s-%d", rs.Name, hash, i), o, nil))
	}
	return pods
}

// StatefulSetPods returns the pods <name>-0 ... <name>-(replicas-1) that
// are not in existing (names of pods that already exist), with the
// statefulset pod-name and pod-index labels, hostname <name>-<i> and
// subdomain spec.serviceName, as the StatefulSet controller creates them.
// Each volumeClaimTemplate becomes a volume of that name (replacing a
// template volume of the same name) naming the claim
// <template>-<statefulset>-<i>, as the StatefulSet controller does.
func StatefulSetPods(s *appsv1.StatefulSet, existing map[string]bool) []*corev1.Pod {
	ns := namespaceOf(&s.ObjectMeta)
	o := owner{apiVersion: "apps/v1", kind: "StatefulSet", name: s.Name, namespace: ns, uid: uidOf(&s.ObjectMeta, "StatefulSet")}
	var pods []*corev1.Pod
	for i := range replicas(s.Spec.Replicas) {
		name := fmt.Sprintf("%s-%d", s.Name, i)
		if existing[name] {
			continue
		}
		p := newPod(&s.Spec.Template, ns, name, o, map[string]string{
			LabelStatefulSetPod: name, LabelPodIndex: strconv.Itoa(i),
		})
		p.Spec.Hostname = name
		p.Spec.Subdomain = s.Spec.ServiceName
		for _, t := range s.Spec.VolumeClaimTemplates {
			vol := corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: StatefulSetClaimName(t.Name, s.Name, i)}}}
			replaced := false
			for j := range p.Spec.Volumes {
				if p.Spec.Volumes[j].Name == t.Name {
					p.Spec.Volumes[j], replaced = vol, true
				}
			}
			if !replaced {
				p.Spec.Volumes = append(p.Spec.Volumes, vol)
			}
		}
		pods = append(pods, p)
	}
	return pods
}

// StatefulSetClaimName is the claim a StatefulSet's volumeClaimTemplate
// gives replica i: <template>-<statefulset>-<i> (kubernetes:
// pkg/controller/statefulset getPersistentVolumeClaimName).
func StatefulSetClaimName(template, statefulSet string, i int) string {
	return fmt.Sprintf("%s-%s-%d", template, statefulSet, i)
}

// JobPods returns the pods a Job runs at once: none when suspended, else
// min(parallelism, completions - succeeded) (parallelism defaults to 1;
// without completions it is parallelism) minus have already running. Pods
// are named <name>-<hash>-<i> and labelled with the job name and controller
// UID; Indexed jobs also get the completion-index annotation.
func JobPods(j *batchv1.Job, have int) []*corev1.Pod {
	if j.Spec.Suspend != nil && *j.Spec.Suspend {
		return nil
	}
	want := replicas(j.Spec.Parallelism)
	if j.Spec.Completions != nil {
		want = min(want, max(int(*j.Spec.Completions)-int(j.Status.Succeeded), 0))
	}
	ns := namespaceOf(&j.ObjectMeta)
	uid := uidOf(&j.ObjectMeta, "Job")
	o := owner{apiVersion: "batch/v1", kind: "Job", name: j.Name, namespace: ns, uid: uid}
	hash := TemplateHash(&j.Spec.Template)
	indexed := j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
	var pods []*corev1.Pod
	for i := have; i < want; i++ {
		p := newPod(&j.Spec.Template, ns, fmt.Sprintf("%s-%s-%d", j.Name, hash, i), o, map[string]string{
			LabelJobName: j.Name, LabelControllerUID: string(uid), "job-name": j.Name, "controller-uid": string(uid),
		})
		if indexed {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[AnnotationJobIndex] = strconv.Itoa(i)
		}
		pods = append(pods, p)
	}
	return pods
}
