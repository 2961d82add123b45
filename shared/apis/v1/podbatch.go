package v1

// The wire contract between the in-cluster forwarder and the intake API.
//
// Routes. Each message kind has one route; POST bodies are JSON of at most
// MaxMessageBytes and carry the message's idempotency key twice: in the body
// ("id") and in the Idempotency-Key header.
//
//	POST RoutePodBatches           PodBatch          -> 202 PodBatchResult (State Queued, or what is known for a repeated ID)
//	GET  RoutePodBatches + "/{id}"                   -> 200 PodBatchResult
//	POST RouteConfig               ClusterConfig     -> 202 Receipt
//	POST RouteRegistrations        NodeRegistrations -> 202 Receipt
//	POST RouteSnapshots            ClusterSnapshot   -> 202 Receipt
//	GET  RouteNodeClaims                             -> 200 NodeClaimList (every NodeClaim the API holds for the cluster; paged, see below)
//	GET  RouteEvents                                 -> 200 EventList (the newest unexpired event records, at most MaxEventsPerList)
//	GET  RouteNodeClasses                            -> 200 NodeClassStatusList (what the API last resolved for each EC2NodeClass; paged)
//	GET  RouteSync                                   -> 200 Sync (the three answers above in one, for a poller; NodeClaims only when changed since QueryNodeClaimsGeneration)
//
// Paging, as the Kubernetes API pages lists. A GET of RouteNodeClaims or
// RouteNodeClasses with the query parameter QueryLimit (1..MaxListLimit)
// answers at most that many items, fewer when their encoding would pass
// MaxMessageBytes, sorted by name, and sets metadata.continue when more may
// follow; the next page is asked with the same limit and QueryContinue set to
// that token, until an answer has no token. An item that exists for the whole
// listing is on exactly one page. Without QueryLimit the answer holds every
// item, or is a 500 when they do not fit one answer.
//
// A rejected request gets a 4xx and an ErrorResponse naming the field paths at
// fault (HTTPStatus maps decode errors to codes); nothing of it is stored. A
// POST repeating an ID the API has already accepted is answered as the
// first one was (Duplicate set) and changes nothing, so a sender may retry any
// POST with the same body until it gets an answer. A POST repeating an ID
// whose first request is still being applied (or died mid-apply, until its
// claim lapses about 30 s later) is answered 409 Conflict with Retry-After
// (seconds) and changes nothing; the sender retries the same body after that
// delay. A 2xx is only ever given once the message is applied. A
// ClusterSnapshot is the exception: storing one again changes nothing (the
// newest complete snapshot stays current), so a repeat is applied again and
// answered as the first was, without Duplicate and never 409.
//
// Versioning. Every message names APIVersion and its kind. Within v1,
// changes are additive only: a new optional field, never a removed, renamed or
// re-typed one, and never a new meaning for an old one. Receivers decode
// unknown fields as warnings (returned by the Decode functions), so the
// forwarder and the API can be upgraded in either order. A breaking change is
// a new apiVersion served on new routes ("/v2/..."), with both versions served
// while forwarders move. A message with another apiVersion, or a kind that is
// not the route's, is rejected.
//
// Size bounds. MaxMessageBytes bounds every body: API Gateway accepts 10 MB
// and a synchronously invoked Lambda 6 MB of event, inside which the body is a
// JSON string whose escaping grows it by up to about a third, so 4 MiB of body
// always fits. The item bounds (MaxPodsPerBatch and the like) stop a message
// that is small in bytes but large in work. A sender with more than fits splits
// it: pod batches into independent batches, snapshots into parts.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodewright/nodewright/shared/apis/apijson"
)

// APIVersion is the apiVersion of every forwarder <-> API message.
const APIVersion = "nodewright.dev/v1"

// Message kinds.
const (
	KindPodBatch          = "PodBatch"
	KindPodBatchResult    = "PodBatchResult"
	KindClusterConfig     = "ClusterConfig"
	KindNodeRegistrations = "NodeRegistrations"
	KindClusterSnapshot   = "ClusterSnapshot"
	KindReceipt           = "Receipt"
	KindEventList         = "EventList"
	KindNodeClassStatuses = "NodeClassStatusList"
	KindSync              = "Sync"
)

// Routes of the intake API, relative to its base URL.
const (
	RoutePodBatches    = "/v1/podbatches"
	RouteConfig        = "/v1/config"
	RouteRegistrations = "/v1/registrations"
	RouteSnapshots     = "/v1/snapshots"
	RouteNodeClaims    = "/v1/nodeclaims"
	RouteEvents        = "/v1/events"
	RouteNodeClasses   = "/v1/nodeclasses"
	// RouteSync answers GET with a Sync: what RouteNodeClasses,
	// RouteNodeClaims and RouteEvents answer, in one request.
	RouteSync = "/v1/sync"
	// RouteMetrics answers GET with a MetricList: the decision metrics the
	// Lambdas stored, which outlive every process.
	RouteMetrics = "/v1/metrics"
)

// Query parameters of the paged GET routes (see Paging above).
const (
	QueryLimit    = "limit"
	QueryContinue = "continue"
	// MaxListLimit bounds QueryLimit.
	MaxListLimit = 1000
	// QueryNodeClaimsGeneration, on a GET of RouteSync, is the
	// Sync.NodeClaimsGeneration of the poller's last complete NodeClaims
	// (a whole number of at least 1): while it is still the API's
	// generation, the answer's NodeClaims is left empty and
	// NodeClaimsUnchanged set.
	QueryNodeClaimsGeneration = "nodeClaimsGeneration"
)

// HeaderIdempotencyKey carries a message's ID on every POST; it must equal
// the body's "id".
const HeaderIdempotencyKey = "Idempotency-Key"

// Bounds of the wire contract.
const (
	// MaxMessageBytes bounds a request body (4 MiB; see the file comment).
	MaxMessageBytes = 4 << 20
	// MaxIDLength bounds message IDs: they become Step Functions execution
	// names (at most 80 characters of [A-Za-z0-9_-]) and SQS deduplication
	// IDs (at most 128).
	MaxIDLength = 80
	// MaxClusterNameLength is EKS's limit on cluster names.
	MaxClusterNameLength = 100
	// MaxPodsPerBatch bounds the pods of one PodBatch. Typical pods (requests,
	// owner, a toleration, a spread constraint, a sidecar) summarize to about
	// 900 bytes, so a full batch of them fits MaxMessageBytes; a sender still
	// splits by encoded size, since a pod with large affinities can be bigger.
	MaxPodsPerBatch = 4000
	// MaxNodesPerMessage bounds the nodes of one NodeRegistrations or one
	// ClusterSnapshot part.
	MaxNodesPerMessage = 5000
	// MaxPodsPerSnapshotPart bounds the pods of one ClusterSnapshot part.
	MaxPodsPerSnapshotPart = 20000
	// MaxSnapshotParts bounds how many parts one snapshot may be split into.
	MaxSnapshotParts = 64
	// MaxConfigObjects bounds the NodePools and, separately, the
	// EC2NodeClasses of one ClusterConfig.
	MaxConfigObjects = 1000
	// MaxEventsPerList bounds the records of one EventList. The API answers
	// with the newest records (fewer when their encoding would not fit
	// MaxMessageBytes), so a poller that polls more often than this many
	// records arrive sees every one of them.
	MaxEventsPerList = 1000
)

// ErrMessageTooLarge is wrapped by the Decode functions when a body exceeds
// MaxMessageBytes, and by senders that refuse to send one.
var ErrMessageTooLarge = errors.New("message too large")

var (
	idPattern          = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	clusterNamePattern = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]*$`)
)

// PodAnnotationKeys are the only pod annotations a PodSummary carries: those
// that scheduling, disruption or draining read (karpenter-spec sections 1.5
// and 6.2). Other annotations are dropped to keep messages small.
var PodAnnotationKeys = []string{
	AnnotationDoNotDisrupt,
	"controller.kubernetes.io/pod-deletion-cost",
	corev1.MirrorPodAnnotationKey,
}

// PodBatch is one window of provisionable pods (karpenter-spec section 3.1):
// pods the kube-scheduler marked Unschedulable, plus reschedulable pods of
// nodes tainted karpenter.sh/disrupted. It is the whole pending set when the
// window closed, not a delta; the provisioner solves batches one at a time.
type PodBatch struct {
	metav1.TypeMeta `json:",inline"`
	// ID is the idempotency key: 1..MaxIDLength characters of [A-Za-z0-9_-],
	// unique per batch and identical across retries of it.
	ID string `json:"id"`
	// Cluster is the EKS cluster name; the API rejects another cluster's.
	Cluster string `json:"cluster"`
	// CreatedAt is when the batch window closed (forwarder clock).
	CreatedAt metav1.Time `json:"createdAt"`
	// Pods are 1..MaxPodsPerBatch pods with distinct UIDs.
	Pods []PodSummary `json:"pods"`
	// DaemonSets are every DaemonSet of the cluster when the window closed,
	// so the solve counts the daemonset overhead as of its pods, as
	// Karpenter reads DaemonSets at solve time (karpenter-spec section
	// 3.2), not as of the last snapshot. Nil (the field absent: a forwarder
	// that predates it) means "use the snapshot's"; an empty list means the
	// cluster has none. Named, with distinct namespace/names.
	DaemonSets []DaemonSetSummary `json:"daemonSets"`
	// Volumes are the PersistentVolumeClaims the pods' volumes name, the
	// PersistentVolumes those claims are bound to and the StorageClasses of
	// the unbound ones, as the solver's volume topology reads them
	// (karpenter-spec section 3; see scheduling.Volumes), trimmed by the
	// Summarize functions below. Objects a pod names that do not exist are
	// absent: the solver then says which is missing.
	Volumes VolumeObjects `json:"volumes,omitzero"`
}

// VolumeObjects are storage objects as the solver's volume topology reads
// them.
type VolumeObjects struct {
	Claims            []corev1.PersistentVolumeClaim `json:"claims,omitempty"`
	PersistentVolumes []corev1.PersistentVolume      `json:"persistentVolumes,omitempty"`
	StorageClasses    []storagev1.StorageClass       `json:"storageClasses,omitempty"`
}

// SummarizeClaim keeps what volume topology reads of a claim: namespace,
// name, deletionTimestamp, the pv.kubernetes.io/bind-completed annotation,
// spec.volumeName, spec.storageClassName and status.phase. It shares no
// memory with c.
func SummarizeClaim(c *corev1.PersistentVolumeClaim) corev1.PersistentVolumeClaim {
	out := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, UID: c.UID, DeletionTimestamp: c.DeletionTimestamp.DeepCopy()},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: c.Spec.VolumeName, StorageClassName: clonePtr(c.Spec.StorageClassName)},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: c.Status.Phase},
	}
	if v, ok := c.Annotations[AnnotationBindCompleted]; ok {
		out.Annotations = map[string]string{AnnotationBindCompleted: v}
	}
	return out
}

// AnnotationBindCompleted is set on a claim by the PersistentVolume
// controller once its binding is complete (kubernetes:
// pkg/controller/volume/persistentvolume annBindCompleted).
const AnnotationBindCompleted = "pv.kubernetes.io/bind-completed"

// SummarizePersistentVolume keeps a volume's name, node affinity, its CSI
// driver (spec.csi.driver, which CSI attach limits count against) and
// whether it is a local or hostPath volume (whose hostname affinity a new
// node cannot meet). It shares no memory with pv.
func SummarizePersistentVolume(pv *corev1.PersistentVolume) corev1.PersistentVolume {
	out := corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv.Name, UID: pv.UID},
		Spec:       corev1.PersistentVolumeSpec{NodeAffinity: pv.Spec.NodeAffinity.DeepCopy()},
	}
	switch {
	case pv.Spec.Local != nil:
		out.Spec.Local = &corev1.LocalVolumeSource{Path: pv.Spec.Local.Path}
	case pv.Spec.HostPath != nil:
		out.Spec.HostPath = &corev1.HostPathVolumeSource{Path: pv.Spec.HostPath.Path}
	case pv.Spec.CSI != nil:
		out.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: pv.Spec.CSI.Driver}
	}
	return out
}

// CSINodeSummary is a storage.k8s.io/v1 CSINode as the solver's CSI
// attach limits read it: the Node it belongs to (CSINode and Node share
// their name) and, per CSI driver that reports one,
// spec.drivers[].allocatable.count, the most volumes of that driver the
// node can attach (for the EBS CSI driver, set per instance type by the
// driver's node plugin). A driver without allocatable.count is absent: it
// has no limit (karpenter: pkg/scheduling/volumeusage.go reads the same
// field).
type CSINodeSummary struct {
	Name string `json:"name"`
	// Limits maps a CSI driver name to its attach limit (>= 0).
	Limits map[string]int `json:"limits,omitempty"`
}

// SummarizeCSINode returns the summary of n, sharing no memory with it.
func SummarizeCSINode(n *storagev1.CSINode) CSINodeSummary {
	out := CSINodeSummary{Name: n.Name}
	for _, d := range n.Spec.Drivers {
		if d.Allocatable == nil || d.Allocatable.Count == nil {
			continue
		}
		if out.Limits == nil {
			out.Limits = map[string]int{}
		}
		out.Limits[d.Name] = int(*d.Allocatable.Count)
	}
	return out
}

// VolumeLimits maps each summarized CSINode's name (its Node's) to its
// driver limits, the shape scheduling.ExistingNode.VolumeLimits takes;
// nodes without limits are left out. The maps are shared with cs.
func VolumeLimits(cs []CSINodeSummary) map[string]map[string]int {
	var out map[string]map[string]int
	for _, c := range cs {
		if len(c.Limits) == 0 {
			continue
		}
		if out == nil {
			out = make(map[string]map[string]int, len(cs))
		}
		out[c.Name] = c.Limits
	}
	return out
}

// SummarizeStorageClass keeps a class's name, provisioner, volume binding
// mode and allowed topologies. It shares no memory with sc.
func SummarizeStorageClass(sc *storagev1.StorageClass) storagev1.StorageClass {
	return storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: sc.Name, UID: sc.UID},
		Provisioner:       sc.Provisioner,
		VolumeBindingMode: clonePtr(sc.VolumeBindingMode),
		AllowedTopologies: deepCopyAll(sc.AllowedTopologies, (*corev1.TopologySelectorTerm).DeepCopy),
	}
}

// ClaimName returns the PersistentVolumeClaim a volume of pod names: a
// persistentVolumeClaim volume's claimName, or <pod>-<volume> for a generic
// ephemeral volume (kubernetes: the ephemeral volume controller's naming);
// ok is false for any other volume.
func ClaimName(pod *corev1.Pod, v *corev1.Volume) (name string, ok bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, true
	case v.Ephemeral != nil:
		return pod.Name + "-" + v.Name, true
	}
	return "", false
}

// PodSummary is the part of a Pod that scheduling and disruption read:
// identity, labels, owners, the disruption annotations (PodAnnotationKeys)
// and the scheduling-relevant spec. Images, commands, env, volumes and status
// are left out.
type PodSummary struct {
	Name              string                  `json:"name"`
	Namespace         string                  `json:"namespace"`
	UID               types.UID               `json:"uid"`
	Labels            map[string]string       `json:"labels,omitempty"`
	Annotations       map[string]string       `json:"annotations,omitempty"`
	OwnerReferences   []metav1.OwnerReference `json:"ownerReferences,omitempty"`
	CreationTimestamp metav1.Time             `json:"creationTimestamp"`
	DeletionTimestamp *metav1.Time            `json:"deletionTimestamp,omitempty"`
	// NodeName is the node the pod is bound to: set in snapshots, and in a
	// PodBatch for a pod that must move off a disrupted node.
	NodeName string         `json:"nodeName,omitempty"`
	Spec     PodSpecSummary `json:"spec"`
}

// WithoutIdentity returns s with its name, UID and creation time cleared,
// unless it has karpenter.sh/do-not-disrupt (whose duration runs from
// the pod's creation): the view no scheduling or disruption decision
// depends on beyond the pod being there. A pod its controller replaced by
// an identical one (a Deployment's pod deleted and recreated on the same
// node) has the same view. The forwarder's snapshot decision hash and
// the disruption evaluation's consolidation fingerprint both hash it.
func (s PodSummary) WithoutIdentity() PodSummary {
	if _, keep := s.Annotations[AnnotationDoNotDisrupt]; !keep {
		s.Name, s.UID, s.CreationTimestamp = "", "", metav1.Time{}
	}
	return s
}

// PodSpecSummary is the scheduling-relevant subset of a PodSpec.
type PodSpecSummary struct {
	NodeSelector                  map[string]string                 `json:"nodeSelector,omitempty"`
	Affinity                      *corev1.Affinity                  `json:"affinity,omitempty"`
	Tolerations                   []corev1.Toleration               `json:"tolerations,omitempty"`
	TopologySpreadConstraints     []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	Containers                    []ContainerSummary                `json:"containers"`
	InitContainers                []ContainerSummary                `json:"initContainers,omitempty"`
	Overhead                      corev1.ResourceList               `json:"overhead,omitempty"`
	Priority                      *int32                            `json:"priority,omitempty"`
	PriorityClassName             string                            `json:"priorityClassName,omitempty"`
	TerminationGracePeriodSeconds *int64                            `json:"terminationGracePeriodSeconds,omitempty"`
	// Volumes are the pod's claim volumes (persistentVolumeClaim and
	// generic ephemeral, the template reduced to its storageClassName and
	// volumeName), set in pod batches (volume topology) and snapshots (CSI
	// attach limits of the pods' nodes); other volumes are left out.
	Volumes []corev1.Volume `json:"volumes,omitempty"`
}

// ContainerSummary is what scheduling reads from a container: its requests,
// its host ports and, for init containers, the restart policy that makes it
// a sidecar.
type ContainerSummary struct {
	Name     string              `json:"name"`
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// HostPorts are the container's ports that bind a host port.
	HostPorts     []corev1.ContainerPort         `json:"hostPorts,omitempty"`
	RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy,omitempty"`
}

// SummarizePod returns the wire summary of p. It copies what it keeps, so
// the summary shares no memory with p (p may be an informer's cached object).
func SummarizePod(p *corev1.Pod) PodSummary { return summarizePod(p, true) }

// PodView returns the same summary as SummarizePod without copying: its
// maps, slices and pointers are p's. Neither may be modified while the
// other is read; it is for encoding or hashing a read-only object (an
// informer's cached pod) without allocating a copy of it.
func PodView(p *corev1.Pod) PodSummary { return summarizePod(p, false) }

// summarizePod is SummarizePod (own: the summary gets its own copies) and
// PodView (not own: it shares p's).
func summarizePod(p *corev1.Pod, own bool) PodSummary {
	s := PodSummary{
		Name:              p.Name,
		Namespace:         p.Namespace,
		UID:               p.UID,
		Labels:            owned(own, p.Labels, maps.Clone),
		CreationTimestamp: p.CreationTimestamp,
		DeletionTimestamp: owned(own, p.DeletionTimestamp, (*metav1.Time).DeepCopy),
		NodeName:          p.Spec.NodeName,
		Spec: PodSpecSummary{
			NodeSelector:                  owned(own, p.Spec.NodeSelector, maps.Clone),
			Affinity:                      owned(own, p.Spec.Affinity, (*corev1.Affinity).DeepCopy),
			Tolerations:                   owned(own, p.Spec.Tolerations, deepCopier((*corev1.Toleration).DeepCopy)),
			TopologySpreadConstraints:     owned(own, p.Spec.TopologySpreadConstraints, deepCopier((*corev1.TopologySpreadConstraint).DeepCopy)),
			Containers:                    summarizeContainers(p.Spec.Containers, own),
			InitContainers:                summarizeContainers(p.Spec.InitContainers, own),
			Overhead:                      owned(own, p.Spec.Overhead, corev1.ResourceList.DeepCopy),
			Priority:                      owned(own, p.Spec.Priority, clonePtr),
			PriorityClassName:             p.Spec.PriorityClassName,
			TerminationGracePeriodSeconds: owned(own, p.Spec.TerminationGracePeriodSeconds, clonePtr),
		},
		Annotations:     podAnnotations(p.Annotations, own),
		OwnerReferences: owned(own, p.OwnerReferences, deepCopier((*metav1.OwnerReference).DeepCopy)),
	}
	return s
}

// podAnnotations returns the annotations of PodAnnotationKeys in a: a
// itself when it holds no other and own is false, else a new map (nil
// when none is there).
func podAnnotations(a map[string]string, own bool) map[string]string {
	found := 0
	for _, k := range PodAnnotationKeys {
		if _, ok := a[k]; ok {
			found++
		}
	}
	switch {
	case found == 0:
		return nil
	case !own && found == len(a):
		return a
	}
	out := make(map[string]string, found)
	for _, k := range PodAnnotationKeys {
		if v, ok := a[k]; ok {
			out[k] = v
		}
	}
	return out
}

// owned returns copyOf(v) when own, else v.
func owned[T any](own bool, v T, copyOf func(T) T) T {
	if own {
		return copyOf(v)
	}
	return v
}

// deepCopier is deepCopyAll with copyOne, as a function of the slice.
func deepCopier[T any](copyOne func(*T) *T) func([]T) []T {
	return func(in []T) []T { return deepCopyAll(in, copyOne) }
}

func summarizeContainers(cs []corev1.Container, own bool) []ContainerSummary {
	if len(cs) == 0 {
		return nil
	}
	out := make([]ContainerSummary, len(cs))
	for i, c := range cs {
		out[i] = ContainerSummary{
			Name:          c.Name,
			Requests:      owned(own, c.Resources.Requests, corev1.ResourceList.DeepCopy),
			RestartPolicy: owned(own, c.RestartPolicy, clonePtr),
		}
		for _, port := range c.Ports {
			if port.HostPort != 0 {
				out[i].HostPorts = append(out[i].HostPorts, port)
			}
		}
	}
	return out
}

// OwnedByDaemonSet reports whether a DaemonSet owns p (an owner reference
// of kind DaemonSet): such pods are daemonset overhead, not workload.
func OwnedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// Pod returns a corev1.Pod carrying everything in the summary, for the
// solver. Fields the summary does not carry are zero. The pod shares no
// memory with s.
func (s PodSummary) Pod() *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              s.Name,
			Namespace:         s.Namespace,
			UID:               s.UID,
			Labels:            maps.Clone(s.Labels),
			Annotations:       maps.Clone(s.Annotations),
			OwnerReferences:   deepCopyAll(s.OwnerReferences, (*metav1.OwnerReference).DeepCopy),
			CreationTimestamp: s.CreationTimestamp,
		},
		Spec: corev1.PodSpec{
			NodeName:                      s.NodeName,
			NodeSelector:                  maps.Clone(s.Spec.NodeSelector),
			Affinity:                      s.Spec.Affinity.DeepCopy(),
			Tolerations:                   deepCopyAll(s.Spec.Tolerations, (*corev1.Toleration).DeepCopy),
			TopologySpreadConstraints:     deepCopyAll(s.Spec.TopologySpreadConstraints, (*corev1.TopologySpreadConstraint).DeepCopy),
			Containers:                    coreContainers(s.Spec.Containers),
			InitContainers:                coreContainers(s.Spec.InitContainers),
			Overhead:                      s.Spec.Overhead.DeepCopy(),
			Priority:                      clonePtr(s.Spec.Priority),
			PriorityClassName:             s.Spec.PriorityClassName,
			TerminationGracePeriodSeconds: clonePtr(s.Spec.TerminationGracePeriodSeconds),
			Volumes:                       deepCopyAll(s.Spec.Volumes, (*corev1.Volume).DeepCopy),
		},
	}
	if s.DeletionTimestamp != nil {
		p.DeletionTimestamp = s.DeletionTimestamp.DeepCopy()
	}
	return p
}

// ClaimVolumes returns p's claim volumes as PodSpecSummary.Volumes keeps
// them, sharing no memory with p; nil when it has none.
func ClaimVolumes(p *corev1.Pod) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName}}})
		case v.Ephemeral != nil:
			eph := &corev1.EphemeralVolumeSource{}
			if t := v.Ephemeral.VolumeClaimTemplate; t != nil {
				eph.VolumeClaimTemplate = &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: clonePtr(t.Spec.StorageClassName), VolumeName: t.Spec.VolumeName}}
			}
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Ephemeral: eph}})
		}
	}
	return out
}

func coreContainers(cs []ContainerSummary) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{
			Name:          c.Name,
			Resources:     corev1.ResourceRequirements{Requests: c.Requests.DeepCopy()},
			Ports:         slices.Clone(c.HostPorts),
			RestartPolicy: clonePtr(c.RestartPolicy),
		}
	}
	return out
}

// NodeSummary is the part of a Node that registration, initialization and
// disruption read. Condition heartbeats are left out, so a summary changes
// only when something that matters changes.
type NodeSummary struct {
	Name       string            `json:"name"`
	UID        types.UID         `json:"uid,omitempty"`
	ProviderID string            `json:"providerID,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// Annotations holds only keys in the karpenter.sh and karpenter.k8s.aws
	// domains.
	Annotations       map[string]string   `json:"annotations,omitempty"`
	Taints            []corev1.Taint      `json:"taints,omitempty"`
	Unschedulable     bool                `json:"unschedulable,omitempty"`
	Capacity          corev1.ResourceList `json:"capacity,omitempty"`
	Allocatable       corev1.ResourceList `json:"allocatable,omitempty"`
	Conditions        []NodeCondition     `json:"conditions,omitempty"`
	CreationTimestamp metav1.Time         `json:"creationTimestamp"`
	DeletionTimestamp *metav1.Time        `json:"deletionTimestamp,omitempty"`
	// LastPodEventTime is when the forwarder last saw a pod event on the
	// node (forwarder clock): a pod bound to it, or one of its pods marked
	// for deletion, deleted or finished (Succeeded/Failed), with events less
	// than 10 s after the last one recorded folded into it. It follows
	// Karpenter's NodeClaim status.lastPodEventTime (pod events controller;
	// karpenter-spec sections 2 and 5.1), from which consolidateAfter runs.
	// A forwarder without history (just started) sets it to the latest
	// creation or start time of the node's bound pods. Nil when neither is
	// known (no pod ever seen on the node).
	LastPodEventTime *metav1.Time `json:"lastPodEventTime,omitempty"`
}

// NodeCondition is a node condition without its heartbeat and message.
type NodeCondition struct {
	Type               corev1.NodeConditionType `json:"type"`
	Status             corev1.ConditionStatus   `json:"status"`
	Reason             string                   `json:"reason,omitempty"`
	LastTransitionTime metav1.Time              `json:"lastTransitionTime,omitzero"`
}

// SummarizeNode returns the wire summary of n, sharing no memory with it.
func SummarizeNode(n *corev1.Node) NodeSummary {
	s := NodeSummary{
		Name:              n.Name,
		UID:               n.UID,
		ProviderID:        n.Spec.ProviderID,
		Labels:            maps.Clone(n.Labels),
		Taints:            deepCopyAll(n.Spec.Taints, (*corev1.Taint).DeepCopy),
		Unschedulable:     n.Spec.Unschedulable,
		Capacity:          n.Status.Capacity.DeepCopy(),
		Allocatable:       n.Status.Allocatable.DeepCopy(),
		CreationTimestamp: n.CreationTimestamp,
	}
	if n.DeletionTimestamp != nil {
		s.DeletionTimestamp = n.DeletionTimestamp.DeepCopy()
	}
	for k, v := range n.Annotations {
		if inDomain(k, Group) || inDomain(k, AWSGroup) {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[k] = v
		}
	}
	for _, c := range n.Status.Conditions {
		s.Conditions = append(s.Conditions, NodeCondition{
			Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime,
		})
	}
	return s
}

// Node returns a corev1.Node carrying everything in the summary, sharing no
// memory with s.
func (s NodeSummary) Node() *corev1.Node {
	n := &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              s.Name,
			UID:               s.UID,
			Labels:            maps.Clone(s.Labels),
			Annotations:       maps.Clone(s.Annotations),
			CreationTimestamp: s.CreationTimestamp,
		},
		Spec: corev1.NodeSpec{
			ProviderID:    s.ProviderID,
			Taints:        deepCopyAll(s.Taints, (*corev1.Taint).DeepCopy),
			Unschedulable: s.Unschedulable,
		},
		Status: corev1.NodeStatus{
			Capacity:    s.Capacity.DeepCopy(),
			Allocatable: s.Allocatable.DeepCopy(),
		},
	}
	if s.DeletionTimestamp != nil {
		n.DeletionTimestamp = s.DeletionTimestamp.DeepCopy()
	}
	for _, c := range s.Conditions {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime,
		})
	}
	return n
}

// ClusterConfig is the complete set of NodePools and EC2NodeClasses the
// cluster holds, as the user applied them (metadata without managedFields or
// the last-applied annotation, spec, no status). It is sent whole on every
// change, so a deletion is an object that is no longer listed. Validate
// checks the envelope only: each object is validated by its consumer, so one
// invalid NodePool does not stop the others from syncing.
type ClusterConfig struct {
	metav1.TypeMeta `json:",inline"`
	// ID is the idempotency key (see PodBatch.ID).
	ID      string `json:"id"`
	Cluster string `json:"cluster"`
	// CreatedAt is when the forwarder read the objects; the API keeps the
	// newest config it has received, by CreatedAt (millisecond precision)
	// and then Generation: a config older than the stored one is
	// acknowledged and discarded, so a delayed retry never brings back a
	// NodePool deleted since.
	CreatedAt metav1.Time `json:"createdAt"`
	// Generation orders configs with the same CreatedAt: the forwarder
	// numbers the configs it builds 1, 2, ... Optional (0).
	Generation int64 `json:"generation,omitempty"`
	// NodePools and EC2NodeClasses have distinct, non-empty names; at most
	// MaxConfigObjects each.
	NodePools      []NodePool     `json:"nodePools"`
	EC2NodeClasses []EC2NodeClass `json:"ec2NodeClasses"`
}

// NodeRegistrations reports nodes that have a providerID and were added or
// changed in a way NodeSummary shows (labels, taints, conditions,
// allocatable), and nodes that were removed. The API links a node to its
// NodeClaim by providerID (karpenter-spec section 5.1, Registered).
type NodeRegistrations struct {
	metav1.TypeMeta `json:",inline"`
	// ID is the idempotency key (see PodBatch.ID).
	ID        string      `json:"id"`
	Cluster   string      `json:"cluster"`
	CreatedAt metav1.Time `json:"createdAt"`
	// Nodes have distinct names and a providerID; at most MaxNodesPerMessage.
	Nodes []NodeSummary `json:"nodes,omitempty"`
	// Removed are nodes deleted from the cluster; at most MaxNodesPerMessage.
	Removed []RemovedNode `json:"removed,omitempty"`
}

// RemovedNode names a node that left the cluster.
type RemovedNode struct {
	Name       string `json:"name"`
	ProviderID string `json:"providerID,omitempty"`
}

// ClusterSnapshot is the compact state the disruption loop reads: nodes,
// bound non-terminal pods, PodDisruptionBudgets and DaemonSets. A snapshot
// too large for one message is sent as Parts messages sharing SnapshotID;
// the snapshot is the union of its parts and is complete once all have
// arrived. Each part has its own ID.
type ClusterSnapshot struct {
	metav1.TypeMeta `json:",inline"`
	// ID is the idempotency key of this part (see PodBatch.ID).
	ID        string      `json:"id"`
	Cluster   string      `json:"cluster"`
	CreatedAt metav1.Time `json:"createdAt"`
	// SnapshotID groups the parts of one snapshot (same pattern as ID).
	SnapshotID string `json:"snapshotID"`
	// Part is this part's 0-based index; Parts (1..MaxSnapshotParts) is
	// how many parts the snapshot has.
	Part  int `json:"part"`
	Parts int `json:"parts"`
	// Nodes: at most MaxNodesPerMessage per part.
	Nodes []NodeSummary `json:"nodes,omitempty"`
	// Pods: bound, not terminal; at most MaxPodsPerSnapshotPart per part.
	Pods                 []PodSummary       `json:"pods,omitempty"`
	PodDisruptionBudgets []PDBSummary       `json:"podDisruptionBudgets,omitempty"`
	DaemonSets           []DaemonSetSummary `json:"daemonSets,omitempty"`
	// ForeignNodeClaims are the karpenter.sh/v1 NodeClaims in the cluster
	// that nodewright did not write (no nodewright.dev/mirror label):
	// Karpenter's, the candidates for adoption (metadata without
	// managedFields, spec and status). The forwarder leaves them out while
	// Karpenter's controller is active (KarpenterActive). At most
	// MaxNodesPerMessage per part, distinct names.
	ForeignNodeClaims []NodeClaim `json:"foreignNodeClaims,omitempty"`
	// CSINodes are the cluster's CSINodes with their drivers' attach
	// limits, named like their Nodes; at most MaxNodesPerMessage per part,
	// distinct names.
	CSINodes []CSINodeSummary `json:"csiNodes,omitempty"`
	// Volumes are the claims the bound pods' volumes name, the
	// PersistentVolumes those are bound to and the StorageClasses of the
	// unbound ones, from which each claim's CSI driver is resolved for
	// the attach limits and the volume topology of a pod that must move
	// (see PodBatch.Volumes).
	Volumes VolumeObjects `json:"volumes,omitzero"`
	// KarpenterActive, when set, says why the forwarder believes
	// Karpenter's controller still runs in the cluster (its leader lease
	// was renewed, or one of its NodeClaims changed, recently); nothing is
	// adopted then.
	KarpenterActive string `json:"karpenterActive,omitempty"`
}

// PDBSummary is the part of a policy/v1 PodDisruptionBudget that decides
// whether a pod may be evicted now (karpenter-spec section 6.2).
type PDBSummary struct {
	Name                       string                `json:"name"`
	Namespace                  string                `json:"namespace"`
	UID                        types.UID             `json:"uid,omitempty"`
	Selector                   *metav1.LabelSelector `json:"selector,omitempty"`
	MinAvailable               *intstr.IntOrString   `json:"minAvailable,omitempty"`
	MaxUnavailable             *intstr.IntOrString   `json:"maxUnavailable,omitempty"`
	UnhealthyPodEvictionPolicy string                `json:"unhealthyPodEvictionPolicy,omitempty"`
	DisruptionsAllowed         int32                 `json:"disruptionsAllowed"`
	CurrentHealthy             int32                 `json:"currentHealthy"`
	DesiredHealthy             int32                 `json:"desiredHealthy"`
	ExpectedPods               int32                 `json:"expectedPods"`
}

// DaemonSetSummary is a DaemonSet as the solver's overhead model reads it:
// its pod template, summarized as a pod (karpenter-spec section 3.2).
type DaemonSetSummary struct {
	Name      string     `json:"name"`
	Namespace string     `json:"namespace"`
	UID       types.UID  `json:"uid,omitempty"`
	Template  PodSummary `json:"template"`
}

// DaemonSet returns the apps/v1 DaemonSet the solver's overhead model
// reads: name, namespace, UID and the pod template (labels, annotations,
// spec) of the summary, sharing no memory with s.
func (s DaemonSetSummary) DaemonSet() appsv1.DaemonSet {
	tmpl := s.Template.Pod()
	return appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations},
			Spec:       tmpl.Spec,
		}},
	}
}

// BatchState is where a PodBatch is in the API.
type BatchState string

// Batch states.
const (
	// BatchQueued: accepted, not solved yet.
	BatchQueued BatchState = "Queued"
	// BatchSolved: solved; the result's nominations, unschedulable reasons
	// and NodeClaims are final.
	BatchSolved BatchState = "Solved"
	// BatchFailed: the provisioner gave up on the batch; Message says why.
	// The pods are retried with the next batch.
	BatchFailed BatchState = "Failed"
)

// PodBatchResult is the API's answer about one PodBatch: what the forwarder
// turns into pod Events and NodeClaim mirrors.
type PodBatchResult struct {
	metav1.TypeMeta `json:",inline"`
	BatchID         string     `json:"batchID"`
	State           BatchState `json:"state"`
	// Duplicate is true when the request repeated an ID the API already had.
	Duplicate bool `json:"duplicate,omitempty"`
	// Nominations maps a pod UID to where the solver placed it.
	Nominations map[types.UID]Nomination `json:"nominations,omitempty"`
	// Unschedulable maps a pod UID to the solver's reason (Karpenter's
	// FailedScheduling text).
	Unschedulable map[types.UID]string `json:"unschedulable,omitempty"`
	// NodeClaims are the NodeClaims created for this batch.
	NodeClaims []NodeClaim `json:"nodeClaims,omitempty"`
	// Message explains a Failed state.
	Message string `json:"message,omitempty"`
}

// Nomination is where a pod will run: an existing node, or a NodeClaim that
// is being launched. Exactly one is set.
type Nomination struct {
	Node      string `json:"node,omitempty"`
	NodeClaim string `json:"nodeClaim,omitempty"`
}

// EventList answers GET RouteEvents: the event records the Lambdas left for
// the forwarder to turn into Kubernetes Events (the interruption Lambda's
// SpotInterrupted, SpotRebalanceRecommendation, InstanceStopping and the
// like; karpenter-spec.md section 10.2). Items are the newest unexpired
// records, oldest first (by Time, then ID), at most MaxEventsPerList of
// them and at most MaxMessageBytes encoded; Omitted counts the older
// unexpired records left out. A record stays listed until it expires (an
// hour after it was written), so a poller sees it on every poll and must
// write it once (by ID).
type EventList struct {
	metav1.TypeMeta `json:",inline"`
	Items           []EventRecord `json:"items"`
	Omitted         int           `json:"omitted,omitempty"`
}

// EventRecord is one Kubernetes Event to write on a Node, NodeClaim, Pod
// or NodePool: on the Pod when Pod is set, else the Node, else the
// NodeClaim, else the NodePool. At least one of them is set.
type EventRecord struct {
	// ID identifies the record: the same ID is the same event, however
	// often it is listed. At most 512 bytes.
	ID string `json:"id"`
	// Time is when it happened (the writer's clock).
	Time metav1.Time `json:"time"`
	// Type is "Normal" or "Warning".
	Type string `json:"type"`
	// Reason is the event reason, e.g. "SpotInterrupted".
	Reason string `json:"reason"`
	// Message is the event's text.
	Message string `json:"message"`
	// NodeClaim names the NodeClaim the event is about; empty for an
	// event about a Pod or a NodePool only.
	NodeClaim string `json:"nodeClaim"`
	// Node names its Node; empty if it never registered. The event is
	// written on the Node when set (and no Pod is), else on the NodeClaim.
	Node string `json:"node,omitempty"`
	// Pod names the Pod the event is about, "<namespace>/<name>"; the
	// Event is written in the pod's namespace.
	Pod string `json:"pod,omitempty"`
	// PodUID is the Pod's UID when the writer knew it (an evicted pod may
	// be gone by the time the record is relayed).
	PodUID types.UID `json:"podUID,omitempty"`
	// NodePool names the NodePool the event is about, when no NodeClaim,
	// Node or Pod is named (a budget that blocks the pool's disruptions).
	NodePool string `json:"nodePool,omitempty"`
	// Condition, when set, is a status condition the forwarder also sets
	// on the NodeClaim object named NodeClaim, if that object is not
	// nodewright's (a Karpenter NodeClaim): today the Adopted condition
	// (ConditionTypeAdopted, False) of a refused adoption. Its
	// lastTransitionTime is when the writer decided.
	Condition *metav1.Condition `json:"condition,omitempty"`
}

// NodeClassStatusList answers GET RouteNodeClasses: what the Lambdas last
// resolved for each EC2NodeClass against EC2 and SSM, sorted by name. The
// forwarder writes it to the EC2NodeClass status subresource, as Karpenter's
// node-class controller does (aws: pkg/controllers/nodeclass).
type NodeClassStatusList struct {
	metav1.TypeMeta `json:",inline"`
	// ListMeta.Continue is set when a paged answer has more (see Paging).
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClassStatus `json:"items"`
}

// Sync answers GET RouteSync: in one answer what a poller would otherwise
// ask of three routes, so that it pays one API request (and one intake
// invocation) a poll instead of three. NodeClasses is every NodeClassStatus
// (as GET RouteNodeClasses answers without QueryLimit), NodeClaims every
// NodeClaim (as GET RouteNodeClaims), Events the EventList GET RouteEvents
// answers. A part whose encoding does not fit the rest of the answer (the
// answer, like every other, stays within MaxMessageBytes) is left empty and
// its route named in Deferred: the poller then GETs that route itself
// (paged where it pages). A part not deferred is complete.
type Sync struct {
	metav1.TypeMeta `json:",inline"`
	NodeClasses     []NodeClassStatus `json:"nodeClasses"`
	NodeClaims      []NodeClaim       `json:"nodeClaims"`
	Events          EventList         `json:"events"`
	// Deferred lists the routes (RouteNodeClasses, RouteNodeClaims,
	// RouteEvents) whose parts are left out, in that order.
	Deferred []string `json:"deferred,omitempty"`
	// NodeClaimsGeneration is the API's NodeClaim generation read before
	// NodeClaims was (0: not known): a counter raised by every NodeClaim
	// write, in the same DynamoDB transaction, so NodeClaims holds every
	// change it counts. A poller sends it back as QueryNodeClaimsGeneration.
	NodeClaimsGeneration int64 `json:"nodeClaimsGeneration,omitempty"`
	// NodeClaimsUnchanged is true when the request's
	// QueryNodeClaimsGeneration is still NodeClaimsGeneration: no
	// NodeClaim changed since the answer that gave it, and NodeClaims is
	// left empty (the poller keeps that answer's).
	NodeClaimsUnchanged bool `json:"nodeClaimsUnchanged,omitempty"`
}

// NodeClassStatus is one EC2NodeClass as the API resolved it.
type NodeClassStatus struct {
	// Name is the EC2NodeClass's name.
	Name string `json:"name"`
	// Generation is the class's metadata.generation the resolution is for.
	Generation int64 `json:"generation"`
	// UID is the class's metadata.uid, when known.
	UID types.UID `json:"uid,omitempty"`
	// ChangedAt is when the resolution last changed (the writer's clock).
	ChangedAt metav1.Time `json:"changedAt"`
	// Status holds the resolved subnets (most free addresses first),
	// security groups, AMIs (newest first) and instance profile, and one
	// condition, Ready: True, or False with Karpenter's reason
	// (SubnetsNotFound, SecurityGroupsNotFound, AMINotFound) and the
	// resolver's message. The condition's lastTransitionTime is not set;
	// the writer of the Kubernetes status sets it.
	Status EC2NodeClassStatus `json:"status"`
}

// Receipt acknowledges a ClusterConfig, NodeRegistrations or ClusterSnapshot.
type Receipt struct {
	metav1.TypeMeta `json:",inline"`
	ID              string `json:"id"`
	// Duplicate is true when the request repeated an ID the API already had
	// (never for a ClusterSnapshot, applied again; see the routes above).
	Duplicate bool `json:"duplicate,omitempty"`
}

// ErrorResponse is the body of every 4xx and 5xx answer.
type ErrorResponse struct {
	// Message is the whole error, one line per problem.
	Message string `json:"message"`
	// Fields lists each problem with the field path it concerns, when known.
	Fields []ErrorField `json:"fields,omitempty"`
}

// ErrorField is one problem with one field of a rejected message.
type ErrorField struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// NewErrorResponse describes err (as returned by the Decode functions or
// Validate) for an ErrorResponse body, listing field paths when err carries
// them.
func NewErrorResponse(err error) ErrorResponse {
	resp := ErrorResponse{Message: err.Error()}
	var ve *ValidationError
	var fe *apijson.FieldError
	switch {
	case errors.As(err, &ve):
		for _, f := range ve.Fields {
			resp.Fields = append(resp.Fields, ErrorField(f))
		}
	case errors.As(err, &fe):
		path := fe.Path
		if path == "" {
			path = "(body)"
		}
		resp.Fields = []ErrorField{{Path: path, Message: fe.Err.Error()}}
	}
	return resp
}

// HTTPStatus is the status code the API answers a Decode or Validate error
// with: 413 for ErrMessageTooLarge, 400 for any other decode or validation
// error, 500 for anything else.
func HTTPStatus(err error) int {
	var ve *ValidationError
	var fe *apijson.FieldError
	switch {
	case errors.Is(err, ErrMessageTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.As(err, &ve), errors.As(err, &fe):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// DecodePodBatch decodes and validates one PodBatch body. It returns the
// unknown and duplicate fields as warnings, and an error that is: wrapping
// ErrMessageTooLarge for a body over MaxMessageBytes; an *apijson.FieldError
// for malformed JSON or a value of the wrong type (with its field path); or a
// *ValidationError for a wrong apiVersion or kind or a Validate failure. It
// never panics.
func DecodePodBatch(data []byte) (*PodBatch, []FieldError, error) {
	return decodeValid[PodBatch](data, KindPodBatch)
}

// DecodeClusterConfig is DecodePodBatch for a ClusterConfig. The NodePools
// and EC2NodeClasses are decoded as the API server would, but not defaulted
// or validated.
func DecodeClusterConfig(data []byte) (*ClusterConfig, []FieldError, error) {
	return decodeValid[ClusterConfig](data, KindClusterConfig)
}

// DecodeNodeRegistrations is DecodePodBatch for a NodeRegistrations.
func DecodeNodeRegistrations(data []byte) (*NodeRegistrations, []FieldError, error) {
	return decodeValid[NodeRegistrations](data, KindNodeRegistrations)
}

// DecodeClusterSnapshot is DecodePodBatch for a ClusterSnapshot part.
func DecodeClusterSnapshot(data []byte) (*ClusterSnapshot, []FieldError, error) {
	return decodeValid[ClusterSnapshot](data, KindClusterSnapshot)
}

// decodeValid decodes a message of kind into a new T and validates it;
// on any error it returns no message, only the warnings gathered so far.
func decodeValid[T any, P interface {
	*T
	Validate() error
}](data []byte, kind string) (*T, []FieldError, error) {
	m := P(new(T))
	warnings, err := decodeMessage(data, kind, m)
	if err != nil {
		return nil, warnings, err
	}
	if err := m.Validate(); err != nil {
		return nil, warnings, err
	}
	return m, warnings, nil
}

func decodeMessage(data []byte, kind string, into any) ([]FieldError, error) {
	if len(data) > MaxMessageBytes {
		return nil, fmt.Errorf("%s body of %d bytes, limit %d: %w", kind, len(data), MaxMessageBytes, ErrMessageTooLarge)
	}
	var head metav1.TypeMeta
	if err := json.Unmarshal(data, &head); err != nil {
		// Malformed or not an object: let apijson locate and word it.
		if _, err := apijson.Unmarshal(data, into); err != nil {
			return nil, err
		}
		return nil, &apijson.FieldError{Err: err}
	}
	var errs fieldErrors
	if head.APIVersion != APIVersion {
		errs.add("apiVersion", "must be %q, got %q", APIVersion, head.APIVersion)
	}
	if head.Kind != kind {
		errs.add("kind", "must be %q on this route, got %q", kind, head.Kind)
	}
	if err := errs.result(kind, ""); err != nil {
		return nil, err
	}
	return decode(data, into)
}

// Validate checks a PodBatch: envelope (apiVersion, kind, id, cluster,
// createdAt), 1..MaxPodsPerBatch pods with distinct UIDs, and each pod's
// summary (see validatePod). It returns nil or a *ValidationError listing
// every problem with its field path. It never panics.
func (b *PodBatch) Validate() error {
	var errs fieldErrors
	validateEnvelope(&errs, b.TypeMeta, KindPodBatch, b.ID, b.Cluster, b.CreatedAt)
	switch {
	case len(b.Pods) == 0:
		errs.add("pods", "must list at least one pod")
	case len(b.Pods) > MaxPodsPerBatch:
		errs.add("pods", "lists %d pods, at most %d are allowed; split the batch", len(b.Pods), MaxPodsPerBatch)
	}
	seen := map[types.UID]int{}
	for i, p := range b.Pods {
		path := index("pods", i)
		validatePod(&errs, path, p)
		if p.UID == "" {
			continue
		}
		if first, dup := seen[p.UID]; dup {
			errs.add(child(path, "uid"), "duplicate of %s", child(index("pods", first), "uid"))
			continue
		}
		seen[p.UID] = i
	}
	validateDaemonSets(&errs, b.DaemonSets)
	validateVolumes(&errs, b.Volumes)
	return errs.result(KindPodBatch, b.ID)
}

// validateVolumes checks that a batch's storage objects are named (claims
// also namespaced) and listed once each.
func validateVolumes(errs *fieldErrors, v VolumeObjects) {
	seen := map[string]string{}
	check := func(path, key string) {
		if first, dup := seen[key]; dup {
			errs.add(child(path, "metadata"), "duplicate of %s", first)
			return
		}
		seen[key] = path
	}
	for i, c := range v.Claims {
		path := index("volumes.claims", i)
		validateNamespacedName(errs, child(path, "metadata"), c.Namespace, c.Name)
		check(path, "pvc/"+c.Namespace+"/"+c.Name)
	}
	for i, pv := range v.PersistentVolumes {
		path := index("volumes.persistentVolumes", i)
		if pv.Name == "" {
			errs.add(child(child(path, "metadata"), "name"), "required")
		}
		check(path, "pv/"+pv.Name)
	}
	for i, sc := range v.StorageClasses {
		path := index("volumes.storageClasses", i)
		if sc.Name == "" {
			errs.add(child(child(path, "metadata"), "name"), "required")
		}
		check(path, "sc/"+sc.Name)
	}
}

// validateDaemonSets checks DaemonSet summaries: named, distinct
// namespace/names, valid containers.
func validateDaemonSets(errs *fieldErrors, dss []DaemonSetSummary) {
	seen := map[string]int{}
	for i, ds := range dss {
		path := index("daemonSets", i)
		validateNamespacedName(errs, path, ds.Namespace, ds.Name)
		validateContainers(errs, child(child(path, "template"), "spec"), ds.Template.Spec)
		key := ds.Namespace + "/" + ds.Name
		if first, dup := seen[key]; dup && ds.Name != "" {
			errs.add(child(path, "name"), "duplicate of %s", index("daemonSets", first))
			continue
		}
		seen[key] = i
	}
}

// Validate checks a ClusterConfig's envelope and that its objects have
// distinct, non-empty names within their kind and at most MaxConfigObjects
// of each kind. The objects themselves are not validated (see ClusterConfig).
func (c *ClusterConfig) Validate() error {
	var errs fieldErrors
	validateEnvelope(&errs, c.TypeMeta, KindClusterConfig, c.ID, c.Cluster, c.CreatedAt)
	if c.Generation < 0 {
		errs.add("generation", "must not be negative, got %d", c.Generation)
	}
	if len(c.NodePools) > MaxConfigObjects {
		errs.add("nodePools", "lists %d NodePools, at most %d are allowed", len(c.NodePools), MaxConfigObjects)
	}
	if len(c.EC2NodeClasses) > MaxConfigObjects {
		errs.add("ec2NodeClasses", "lists %d EC2NodeClasses, at most %d are allowed", len(c.EC2NodeClasses), MaxConfigObjects)
	}
	names := make([]string, len(c.NodePools))
	for i, np := range c.NodePools {
		names[i] = np.Name
	}
	validateNames(&errs, "nodePools", "metadata.name", names)
	names = make([]string, len(c.EC2NodeClasses))
	for i, nc := range c.EC2NodeClasses {
		names[i] = nc.Name
	}
	validateNames(&errs, "ec2NodeClasses", "metadata.name", names)
	return errs.result(KindClusterConfig, c.ID)
}

// Validate checks a NodeRegistrations: envelope, at least one node or
// removal, at most MaxNodesPerMessage of each, and every node with a name
// (distinct) and a providerID.
func (r *NodeRegistrations) Validate() error {
	var errs fieldErrors
	validateEnvelope(&errs, r.TypeMeta, KindNodeRegistrations, r.ID, r.Cluster, r.CreatedAt)
	if len(r.Nodes) == 0 && len(r.Removed) == 0 {
		errs.add("nodes", "must list at least one node or removed node")
	}
	if len(r.Nodes) > MaxNodesPerMessage {
		errs.add("nodes", "lists %d nodes, at most %d are allowed", len(r.Nodes), MaxNodesPerMessage)
	}
	if len(r.Removed) > MaxNodesPerMessage {
		errs.add("removed", "lists %d nodes, at most %d are allowed", len(r.Removed), MaxNodesPerMessage)
	}
	names := make([]string, len(r.Nodes))
	for i, n := range r.Nodes {
		names[i] = n.Name
		if n.ProviderID == "" {
			errs.add(child(index("nodes", i), "providerID"), "required")
		}
		validateResources(&errs, child(index("nodes", i), "allocatable"), n.Allocatable)
	}
	validateNames(&errs, "nodes", "name", names)
	for i, n := range r.Removed {
		if n.Name == "" {
			errs.add(child(index("removed", i), "name"), "required")
		}
	}
	return errs.result(KindNodeRegistrations, r.ID)
}

// Validate checks a ClusterSnapshot part: envelope, snapshotID, 0 <= part <
// parts <= MaxSnapshotParts, the per-part bounds, distinct node names and no
// negative node capacity or allocatable, distinct pod UIDs, each pod's
// summary and that every pod names its node, named PDBs whose counts
// (disruptionsAllowed and the healthy/expected counts, as policy/v1 status
// holds them) are not negative, and named DaemonSets. That the parts of one
// snapshot agree (one part count, no node in two parts) is checked where
// they meet (ddbstore.PutSnapshotPart). CSINodes must be named, distinct,
// with named drivers and no negative limit; storage objects as in a
// PodBatch.
func (s *ClusterSnapshot) Validate() error {
	var errs fieldErrors
	validateEnvelope(&errs, s.TypeMeta, KindClusterSnapshot, s.ID, s.Cluster, s.CreatedAt)
	validateID(&errs, "snapshotID", s.SnapshotID)
	if s.Parts < 1 || s.Parts > MaxSnapshotParts {
		errs.add("parts", "must be between 1 and %d, got %d", MaxSnapshotParts, s.Parts)
	}
	if s.Part < 0 || (s.Parts >= 1 && s.Part >= s.Parts) {
		errs.add("part", "must be between 0 and parts-1 (%d), got %d", s.Parts-1, s.Part)
	}
	if len(s.Nodes) > MaxNodesPerMessage {
		errs.add("nodes", "lists %d nodes, at most %d are allowed per part", len(s.Nodes), MaxNodesPerMessage)
	}
	if len(s.Pods) > MaxPodsPerSnapshotPart {
		errs.add("pods", "lists %d pods, at most %d are allowed per part", len(s.Pods), MaxPodsPerSnapshotPart)
	}
	if len(s.ForeignNodeClaims) > MaxNodesPerMessage {
		errs.add("foreignNodeClaims", "lists %d NodeClaims, at most %d are allowed per part", len(s.ForeignNodeClaims), MaxNodesPerMessage)
	}
	claimNames := make([]string, len(s.ForeignNodeClaims))
	for i, c := range s.ForeignNodeClaims {
		claimNames[i] = c.Name
	}
	validateNames(&errs, "foreignNodeClaims", "metadata.name", claimNames)
	names := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		names[i] = n.Name
		validateResources(&errs, child(index("nodes", i), "capacity"), n.Capacity)
		validateResources(&errs, child(index("nodes", i), "allocatable"), n.Allocatable)
	}
	validateNames(&errs, "nodes", "name", names)
	seen := map[types.UID]int{}
	for i, p := range s.Pods {
		path := index("pods", i)
		validatePod(&errs, path, p)
		if p.NodeName == "" {
			errs.add(child(path, "nodeName"), "required: a snapshot lists bound pods only")
		}
		if p.UID == "" {
			continue
		}
		if first, dup := seen[p.UID]; dup {
			errs.add(child(path, "uid"), "duplicate of %s", child(index("pods", first), "uid"))
			continue
		}
		seen[p.UID] = i
	}
	for i, pdb := range s.PodDisruptionBudgets {
		path := index("podDisruptionBudgets", i)
		validateNamespacedName(&errs, path, pdb.Namespace, pdb.Name)
		for _, c := range []struct {
			field string
			n     int32
		}{{"disruptionsAllowed", pdb.DisruptionsAllowed}, {"currentHealthy", pdb.CurrentHealthy}, {"desiredHealthy", pdb.DesiredHealthy}, {"expectedPods", pdb.ExpectedPods}} {
			if c.n < 0 {
				errs.add(child(path, c.field), "must not be negative, got %d", c.n)
			}
		}
	}
	validateDaemonSets(&errs, s.DaemonSets)
	if len(s.CSINodes) > MaxNodesPerMessage {
		errs.add("csiNodes", "lists %d CSINodes, at most %d are allowed per part", len(s.CSINodes), MaxNodesPerMessage)
	}
	csiNames := make([]string, len(s.CSINodes))
	for i, c := range s.CSINodes {
		csiNames[i] = c.Name
		for _, d := range slices.Sorted(maps.Keys(c.Limits)) {
			path := child(index("csiNodes", i), "limits")
			switch {
			case d == "":
				errs.add(path, "a driver name is empty")
			case c.Limits[d] < 0:
				errs.add(key(path, d), "must not be negative, got %d", c.Limits[d])
			}
		}
	}
	validateNames(&errs, "csiNodes", "name", csiNames)
	validateVolumes(&errs, s.Volumes)
	return errs.result(KindClusterSnapshot, s.ID)
}

func validateEnvelope(errs *fieldErrors, tm metav1.TypeMeta, kind, id, cluster string, createdAt metav1.Time) {
	if tm.APIVersion != APIVersion {
		errs.add("apiVersion", "must be %q, got %q", APIVersion, tm.APIVersion)
	}
	if tm.Kind != kind {
		errs.add("kind", "must be %q, got %q", kind, tm.Kind)
	}
	validateID(errs, "id", id)
	switch {
	case cluster == "":
		errs.add("cluster", "required")
	case len(cluster) > MaxClusterNameLength:
		errs.add("cluster", "must be at most %d characters, got %d", MaxClusterNameLength, len(cluster))
	case !clusterNamePattern.MatchString(cluster):
		errs.add("cluster", "must be an EKS cluster name (a letter or digit, then letters, digits, '-' or '_'), got %q", cluster)
	}
	if createdAt.IsZero() {
		errs.add("createdAt", "required")
	}
}

func validateID(errs *fieldErrors, path, id string) {
	switch {
	case id == "":
		errs.add(path, "required")
	case len(id) > MaxIDLength:
		errs.add(path, "must be at most %d characters, got %d", MaxIDLength, len(id))
	case !idPattern.MatchString(id):
		errs.add(path, "must contain only letters, digits, '-' and '_', got %q", id)
	}
}

// validateNames checks that names[i], found at path[i].nameField, are
// non-empty and distinct.
func validateNames(errs *fieldErrors, path, nameField string, names []string) {
	seen := map[string]int{}
	for i, name := range names {
		p := child(index(path, i), nameField)
		if name == "" {
			errs.add(p, "required")
			continue
		}
		if first, dup := seen[name]; dup {
			errs.add(p, "duplicate name %q (also %s)", name, index(path, first))
			continue
		}
		seen[name] = i
	}
}

func validateNamespacedName(errs *fieldErrors, path, namespace, name string) {
	if name == "" {
		errs.add(child(path, "name"), "required")
	}
	if namespace == "" {
		errs.add(child(path, "namespace"), "required")
	}
}

// validatePod checks the identity of a pod summary (name, namespace, uid,
// creationTimestamp) and the parts of its spec that a malformed sender could
// get wrong in ways the solver cannot recover from.
func validatePod(errs *fieldErrors, path string, p PodSummary) {
	validateNamespacedName(errs, path, p.Namespace, p.Name)
	if p.UID == "" {
		errs.add(child(path, "uid"), "required")
	}
	if p.CreationTimestamp.IsZero() {
		errs.add(child(path, "creationTimestamp"), "required")
	}
	spec := child(path, "spec")
	validateContainers(errs, spec, p.Spec)
	validateResources(errs, child(spec, "overhead"), p.Spec.Overhead)
	for i, t := range p.Spec.Tolerations {
		switch t.Operator {
		case "", corev1.TolerationOpEqual, corev1.TolerationOpExists:
		default:
			errs.add(child(index(child(spec, "tolerations"), i), "operator"), "must be Equal or Exists, got %q", t.Operator)
		}
	}
	for i, c := range p.Spec.TopologySpreadConstraints {
		tp := index(child(spec, "topologySpreadConstraints"), i)
		if c.MaxSkew < 1 {
			errs.add(child(tp, "maxSkew"), "must be at least 1, got %d", c.MaxSkew)
		}
		if c.TopologyKey == "" {
			errs.add(child(tp, "topologyKey"), "required")
		}
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			errs.add(child(tp, "whenUnsatisfiable"), "must be DoNotSchedule or ScheduleAnyway, got %q", c.WhenUnsatisfiable)
		}
	}
}

func validateContainers(errs *fieldErrors, spec string, s PodSpecSummary) {
	if len(s.Containers) == 0 {
		errs.add(child(spec, "containers"), "must list at least one container")
	}
	for _, group := range []struct {
		name string
		cs   []ContainerSummary
	}{{"containers", s.Containers}, {"initContainers", s.InitContainers}} {
		for i, c := range group.cs {
			cp := index(child(spec, group.name), i)
			if c.Name == "" {
				errs.add(child(cp, "name"), "required")
			}
			validateResources(errs, child(cp, "requests"), c.Requests)
			for j, port := range c.HostPorts {
				if port.HostPort < 1 || port.HostPort > 65535 {
					errs.add(child(index(child(cp, "hostPorts"), j), "hostPort"), "must be between 1 and 65535, got %d", port.HostPort)
				}
			}
		}
	}
}

func validateResources(errs *fieldErrors, path string, rl corev1.ResourceList) {
	for _, name := range sortedKeys(rl) {
		q := rl[name]
		if q.Sign() < 0 {
			errs.add(key(path, string(name)), "must not be negative, got %s", q.String())
		}
	}
}

func inDomain(k, domain string) bool {
	prefix, _, found := strings.Cut(k, "/")
	return found && (prefix == domain || strings.HasSuffix(prefix, "."+domain))
}

func deepCopyAll[T any](in []T, copyOne func(*T) *T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i := range in {
		out[i] = *copyOne(&in[i])
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
