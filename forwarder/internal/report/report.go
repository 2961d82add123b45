// Package report builds the forwarder's messages to the API from what its
// informers hold: the pod batch, the cluster config (NodePools and
// EC2NodeClasses as applied), node registrations and the cluster snapshot
// (shared/apis/v1 podbatch.go). It also splits messages that would exceed the
// contract's bounds. It performs no I/O.
package report

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// envelopeBytes is room left in every part for the message envelope (kind,
// IDs, cluster name, timestamps, JSON punctuation).
const envelopeBytes = 4 << 10

// ID returns a message ID: prefix, the time in Unix milliseconds and 16 hex
// digits of the SHA-256 of content, for example "pb-1767225600000-3f2a9c1d0b7e4a55".
// It matches the contract's ID pattern for prefixes of letters and '-'.
func ID(prefix string, at time.Time, content []byte) string {
	sum := sha256.Sum256(content)
	return prefix + "-" + strconv.FormatInt(at.UnixMilli(), 10) + "-" + hex.EncodeToString(sum[:8])
}

// IDOfHash is ID for content whose SHA-256 is already known, as hex
// (hexHash): prefix, the time in Unix milliseconds and its first 16 hex
// digits.
func IDOfHash(prefix string, at time.Time, hexHash string) string {
	return prefix + "-" + strconv.FormatInt(at.UnixMilli(), 10) + "-" + hexHash[:16]
}

// Chunk splits items into consecutive groups of at most maxItems items whose
// JSON encodings sum to at most maxBytes less the envelope allowance. The
// groups are subslices of items (capacity clipped, so an append to one
// copies): the items are not copied, and a change to a group's item is a
// change to items'. It returns an error wrapping v1.ErrMessageTooLarge if
// one item alone is too large.
func Chunk[T any](items []T, maxItems, maxBytes int) ([][]T, error) {
	sizes := make([]int, len(items))
	for i, it := range items {
		data, err := json.Marshal(it)
		if err != nil {
			return nil, fmt.Errorf("encode item %d: %w", i, err)
		}
		sizes[i] = len(data) + 1 // the separating comma
	}
	return chunkSized(items, sizes, maxItems, maxBytes)
}

// chunkSized is Chunk with each item's encoded size (and its comma) given
// in sizes, for a caller that encoded the items already.
func chunkSized[T any](items []T, sizes []int, maxItems, maxBytes int) ([][]T, error) {
	budget := maxBytes - envelopeBytes
	var out [][]T
	start, size := 0, 0
	for i := range items {
		n := sizes[i]
		if n > budget {
			return nil, fmt.Errorf("item %d of %d bytes, limit %d: %w", i, n, budget, v1.ErrMessageTooLarge)
		}
		if i > start && (i-start == maxItems || size+n > budget) {
			out = append(out, items[start:i:i])
			start, size = i, 0
		}
		size += n
	}
	if len(items) > start {
		out = append(out, items[start:len(items):len(items)])
	}
	return out, nil
}

// VolumeSource looks up the storage objects pending pods name (the
// forwarder's informer caches); ok is false for one that does not exist.
type VolumeSource interface {
	Claim(namespace, name string) (*corev1.PersistentVolumeClaim, bool)
	PersistentVolume(name string) (*corev1.PersistentVolume, bool)
	StorageClass(name string) (*storagev1.StorageClass, bool)
}

// PodBatches builds the batches for one closed window: the pods' summaries
// (with their claim volumes), split so each batch respects
// v1.MaxPodsPerBatch and v1.MaxMessageBytes, each carrying every DaemonSet
// (sorted by namespace/name; an empty, non-nil list when there are none) so
// the solve counts the daemonset overhead as of the window, and the
// claims, bound volumes and classes of unbound claims its pods name (from
// vols; none when vols is nil). A single batch has ID "pb-<ms>-<hash of the
// pod UIDs>"; split batches add "-<index>". It returns nil for no pods, and
// an error when the DaemonSets and volumes alone leave no room for a pod.
func PodBatches(cluster string, closed time.Time, pods []*corev1.Pod, daemonSets []*appsv1.DaemonSet, vols VolumeSource) ([]v1.PodBatch, error) {
	if len(pods) == 0 {
		return nil, nil
	}
	dss := make([]v1.DaemonSetSummary, 0, len(daemonSets))
	for _, ds := range daemonSets {
		dss = append(dss, SummarizeDaemonSet(ds))
	}
	slices.SortFunc(dss, func(a, b v1.DaemonSetSummary) int { return compareNames(a.Namespace, a.Name, b.Namespace, b.Name) })
	all := volumeObjects(pods, vols)
	fixed, err := json.Marshal(struct {
		D []v1.DaemonSetSummary
		V v1.VolumeObjects
	}{dss, all})
	if err != nil {
		return nil, fmt.Errorf("encode daemonsets and volumes: %w", err)
	}
	budget := v1.MaxMessageBytes - len(fixed)
	if budget <= 0 {
		return nil, fmt.Errorf("split pod batch: the DaemonSets and volumes alone encode to %d bytes, more than %d: %w", len(fixed), v1.MaxMessageBytes, v1.ErrMessageTooLarge)
	}
	summaries := make([]v1.PodSummary, len(pods))
	byUID := make(map[types.UID]*corev1.Pod, len(pods))
	var uids []byte
	for i, p := range pods {
		summaries[i] = v1.SummarizePod(p)
		summaries[i].Spec.Volumes = v1.ClaimVolumes(p)
		byUID[p.UID] = p
		uids = append(uids, p.UID...)
		uids = append(uids, '\n')
	}
	chunks, err := Chunk(summaries, v1.MaxPodsPerBatch, budget)
	if err != nil {
		return nil, fmt.Errorf("split pod batch: %w", err)
	}
	id := ID("pb", closed, uids)
	out := make([]v1.PodBatch, len(chunks))
	for i, c := range chunks {
		out[i] = v1.PodBatch{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatch},
			ID:         id,
			Cluster:    cluster,
			CreatedAt:  metav1.NewTime(closed),
			Pods:       c,
			DaemonSets: dss,
			Volumes:    all,
		}
		if len(chunks) > 1 {
			out[i].ID = id + "-" + strconv.Itoa(i)
			var cp []*corev1.Pod
			for _, s := range c {
				cp = append(cp, byUID[s.UID])
			}
			out[i].Volumes = volumeObjects(cp, vols)
		}
	}
	return out, nil
}

// volumeObjects collects the claims pods name, the volumes the bound ones
// are bound to and the classes of the unbound ones (the template's class
// for an ephemeral volume whose claim does not exist yet), each once, in
// first-seen order.
func volumeObjects(pods []*corev1.Pod, vols VolumeSource) v1.VolumeObjects {
	var out v1.VolumeObjects
	if vols == nil {
		return out
	}
	seen := map[string]bool{}
	addClass := func(name *string) {
		if name == nil || *name == "" || seen["sc/"+*name] {
			return
		}
		seen["sc/"+*name] = true
		if sc, ok := vols.StorageClass(*name); ok {
			out.StorageClasses = append(out.StorageClasses, v1.SummarizeStorageClass(sc))
		}
	}
	for _, p := range pods {
		for i := range p.Spec.Volumes {
			v := &p.Spec.Volumes[i]
			name, ok := v1.ClaimName(p, v)
			if !ok {
				continue
			}
			key := "pvc/" + p.Namespace + "/" + name
			if seen[key] {
				continue
			}
			seen[key] = true
			claim, found := vols.Claim(p.Namespace, name)
			if !found {
				if v.Ephemeral != nil && v.Ephemeral.VolumeClaimTemplate != nil {
					addClass(v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName)
				}
				continue
			}
			out.Claims = append(out.Claims, v1.SummarizeClaim(claim))
			if pvName := claim.Spec.VolumeName; pvName != "" {
				if !seen["pv/"+pvName] {
					seen["pv/"+pvName] = true
					if pv, ok := vols.PersistentVolume(pvName); ok {
						out.PersistentVolumes = append(out.PersistentVolumes, v1.SummarizePersistentVolume(pv))
					}
				}
				continue
			}
			addClass(claim.Spec.StorageClassName)
		}
	}
	return out
}

// lastApplied is kubectl's copy of the applied manifest: large and
// redundant with the object.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// Config decodes NodePools and EC2NodeClasses from the dynamic informers'
// objects into a ClusterConfig, as the user applied them: metadata without
// managedFields or the last-applied annotation, spec, no status; sorted by
// name. It returns the decode warnings (fields Karpenter v1.14.1 does not
// define, prefixed with the object) and fails if any object does not decode,
// since a config missing an object would read as its deletion. The ID is set
// from the content and at; hash identifies the content for change detection.
func Config(cluster string, at time.Time, nodePools, nodeClasses []*unstructured.Unstructured) (cfg v1.ClusterConfig, hash string, warnings []string, err error) {
	cfg = v1.ClusterConfig{
		TypeMeta:       metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindClusterConfig},
		Cluster:        cluster,
		CreatedAt:      metav1.NewTime(at),
		NodePools:      []v1.NodePool{},
		EC2NodeClasses: []v1.EC2NodeClass{},
	}
	var errs []error
	for _, u := range sortByName(nodePools) {
		np, warns, err := decodeObject(u, v1.DecodeNodePool)
		if err != nil {
			errs = append(errs, fmt.Errorf("decode NodePool %s: %w", u.GetName(), err))
			continue
		}
		warnings = append(warnings, prefixed("NodePool "+u.GetName(), warns)...)
		np.Status = v1.NodePoolStatus{}
		cleanMeta(&np.ObjectMeta)
		cfg.NodePools = append(cfg.NodePools, *np)
	}
	for _, u := range sortByName(nodeClasses) {
		nc, warns, err := decodeObject(u, v1.DecodeEC2NodeClass)
		if err != nil {
			errs = append(errs, fmt.Errorf("decode EC2NodeClass %s: %w", u.GetName(), err))
			continue
		}
		warnings = append(warnings, prefixed("EC2NodeClass "+u.GetName(), warns)...)
		nc.Status = v1.EC2NodeClassStatus{}
		cleanMeta(&nc.ObjectMeta)
		cfg.EC2NodeClasses = append(cfg.EC2NodeClasses, *nc)
	}
	if len(errs) > 0 {
		return v1.ClusterConfig{}, "", warnings, errors.Join(errs...)
	}
	content, err := json.Marshal(struct {
		NodePools      []v1.NodePool
		EC2NodeClasses []v1.EC2NodeClass
	}{cfg.NodePools, cfg.EC2NodeClasses})
	if err != nil {
		return v1.ClusterConfig{}, "", warnings, fmt.Errorf("encode config: %w", err)
	}
	cfg.ID = ID("cfg", at, content)
	return cfg, hashOf(content), warnings, nil
}

func decodeObject[T any](u *unstructured.Unstructured, decode func([]byte) (*T, []v1.FieldError, error)) (*T, []v1.FieldError, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, nil, err
	}
	return decode(data)
}

func prefixed(object string, warns []v1.FieldError) []string {
	out := make([]string, len(warns))
	for i, w := range warns {
		out[i] = object + ": " + w.Error()
	}
	return out
}

func cleanMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	if _, ok := m.Annotations[lastApplied]; ok {
		m.Annotations = maps.Clone(m.Annotations)
		delete(m.Annotations, lastApplied)
		if len(m.Annotations) == 0 {
			m.Annotations = nil
		}
	}
}

func sortByName(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := slices.Clone(objs)
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return out
}

func hashOf(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// Registrations tracks which node summaries the API has acknowledged, so
// only changes are reported. It is not safe for concurrent use.
type Registrations struct {
	reported map[string]v1.NodeSummary
}

// NewRegistrations returns a tracker that has reported nothing yet.
func NewRegistrations() *Registrations {
	return &Registrations{reported: map[string]v1.NodeSummary{}}
}

// Pending returns the nodes (with a providerID) whose summary differs from
// the last acknowledged one, by name, and the acknowledged nodes that are no
// longer listed.
func (r *Registrations) Pending(nodes []*corev1.Node) (changed []v1.NodeSummary, removed []v1.RemovedNode) {
	present := map[string]bool{}
	for _, n := range nodes {
		if n.Spec.ProviderID == "" {
			continue
		}
		present[n.Name] = true
		s := v1.SummarizeNode(n)
		if last, ok := r.reported[n.Name]; ok && equalJSON(last, s) {
			continue
		}
		changed = append(changed, s)
	}
	for _, name := range slices.Sorted(maps.Keys(r.reported)) {
		if !present[name] {
			removed = append(removed, v1.RemovedNode{Name: name, ProviderID: r.reported[name].ProviderID})
		}
	}
	slices.SortFunc(changed, func(a, b v1.NodeSummary) int { return cmp.Compare(a.Name, b.Name) })
	return changed, removed
}

// Acknowledge records that the API has received changed and removed.
func (r *Registrations) Acknowledge(changed []v1.NodeSummary, removed []v1.RemovedNode) {
	for _, s := range changed {
		r.reported[s.Name] = s
	}
	for _, n := range removed {
		delete(r.reported, n.Name)
	}
}

// RegistrationMessages packs changed and removed nodes into messages within
// the contract's bounds (IDs "nr-<ms>-<hash>[-<index>]"). It returns nil when
// there is nothing to report.
func RegistrationMessages(cluster string, at time.Time, changed []v1.NodeSummary, removed []v1.RemovedNode) ([]v1.NodeRegistrations, error) {
	if len(changed) == 0 && len(removed) == 0 {
		return nil, nil
	}
	nodeChunks, err := Chunk(changed, v1.MaxNodesPerMessage, v1.MaxMessageBytes)
	if err != nil {
		return nil, fmt.Errorf("split registrations: %w", err)
	}
	removedChunks, err := Chunk(removed, v1.MaxNodesPerMessage, v1.MaxMessageBytes)
	if err != nil {
		return nil, fmt.Errorf("split removals: %w", err)
	}
	content, err := json.Marshal(struct {
		C []v1.NodeSummary
		R []v1.RemovedNode
	}{changed, removed})
	if err != nil {
		return nil, fmt.Errorf("encode registrations: %w", err)
	}
	id := ID("nr", at, content)
	var out []v1.NodeRegistrations
	for _, c := range nodeChunks {
		out = append(out, v1.NodeRegistrations{Nodes: c})
	}
	for _, c := range removedChunks {
		out = append(out, v1.NodeRegistrations{Removed: c})
	}
	for i := range out {
		out[i].TypeMeta = metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindNodeRegistrations}
		out[i].Cluster = cluster
		out[i].CreatedAt = metav1.NewTime(at)
		out[i].ID = id
		if len(out) > 1 {
			out[i].ID = id + "-" + strconv.Itoa(i)
		}
	}
	return out, nil
}

// Storage is what a snapshot shows of the cluster's storage: the
// CSINodes (CSI attach limits per node) and where the bound pods' claims
// are looked up (nil: no claim, volume or class is sent).
type Storage struct {
	CSINodes []*storagev1.CSINode
	Volumes  VolumeSource
}

// summarizeCluster is the snapshot's content before encoding: the
// summaries of every node, every bound pod that is not terminal (with its
// claim volumes), PDB, DaemonSet, foreign NodeClaim and CSINode, and the
// storage objects the bound pods name, each kind in name order.
func summarizeCluster(nodes []*corev1.Node, pods []*corev1.Pod, pdbs []*policyv1.PodDisruptionBudget, daemonSets []*appsv1.DaemonSet,
	foreign []v1.NodeClaim, storage Storage) v1.ClusterSnapshot {
	var s v1.ClusterSnapshot
	s.ForeignNodeClaims = slices.Clone(foreign)
	slices.SortFunc(s.ForeignNodeClaims, func(a, b v1.NodeClaim) int { return compareNames("", a.Name, "", b.Name) })
	for _, n := range nodes {
		s.Nodes = append(s.Nodes, v1.SummarizeNode(n))
	}
	var bound []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		bound = append(bound, p)
	}
	slices.SortFunc(bound, func(a, b *corev1.Pod) int { return compareNames(a.Namespace, a.Name, b.Namespace, b.Name) })
	for _, p := range bound {
		// The summaries are encoded and posted, never modified: they may
		// share the cached pods' memory.
		sum := v1.PodView(p)
		sum.Spec.Volumes = v1.ClaimVolumes(p)
		s.Pods = append(s.Pods, sum)
	}
	s.Volumes = volumeObjects(bound, storage.Volumes)
	for _, c := range storage.CSINodes {
		s.CSINodes = append(s.CSINodes, v1.SummarizeCSINode(c))
	}
	slices.SortFunc(s.CSINodes, func(a, b v1.CSINodeSummary) int { return compareNames("", a.Name, "", b.Name) })
	for _, pdb := range pdbs {
		s.PodDisruptionBudgets = append(s.PodDisruptionBudgets, SummarizePDB(pdb))
	}
	for _, ds := range daemonSets {
		s.DaemonSets = append(s.DaemonSets, SummarizeDaemonSet(ds))
	}
	slices.SortFunc(s.Nodes, func(a, b v1.NodeSummary) int { return compareNames("", a.Name, "", b.Name) })
	slices.SortFunc(s.PodDisruptionBudgets, func(a, b v1.PDBSummary) int { return compareNames(a.Namespace, a.Name, b.Namespace, b.Name) })
	slices.SortFunc(s.DaemonSets, func(a, b v1.DaemonSetSummary) int { return compareNames(a.Namespace, a.Name, b.Namespace, b.Name) })

	return s
}

// Snapshot builds the cluster snapshot: every node, every bound pod that is
// not terminal (with its claim volumes), every PDB, every DaemonSet, the
// foreign NodeClaims (reported for adoption), every CSINode and the
// claims, bound volumes and classes the bound pods name (from storage), in
// name order (storage objects in first-seen order of the sorted pods),
// split into as few parts as the bounds allow. hash identifies the content
// (not the time), so an unchanged cluster can skip a post; decision
// identifies what the decisions read of it with the churn of replaced pods
// left out: every item but a pod's name, UID and CreationTimestamp when the
// pod has no karpenter.sh/do-not-disrupt annotation (that annotation's
// duration runs from the pod's start), with the pods as a set. A pod
// deleted and recreated by its owner with the same spec, labels,
// annotations and owner on the same node therefore leaves decision
// unchanged; any other change of a node, pod, PDB, DaemonSet, foreign
// NodeClaim, CSINode or storage object changes it. Nodes carry no
// LastPodEventTime here (the forwarder stamps it on the parts after), so
// neither hash covers it. Each item is encoded once to compute both hashes
// and the parts' sizes.
func Snapshot(cluster string, at time.Time, nodes []*corev1.Node, pods []*corev1.Pod, pdbs []*policyv1.PodDisruptionBudget, daemonSets []*appsv1.DaemonSet,
	foreign []v1.NodeClaim, storage Storage) (parts []v1.ClusterSnapshot, hash, decision string, err error) {
	s := summarizeCluster(nodes, pods, pdbs, daemonSets, foreign, storage)

	// Every item is encoded once (a pod without its name, UID and
	// creation time, see encodePods): the encodings feed both hashes and
	// size the parts; none is kept.
	e := newSnapshotHashes()
	nodeSizes, err := encodeItems(e, "nodes", s.Nodes)
	if err != nil {
		return nil, "", "", err
	}
	podSizes, err := encodePods(e, s.Pods)
	if err != nil {
		return nil, "", "", err
	}
	pdbSizes, err := encodeItems(e, "podDisruptionBudgets", s.PodDisruptionBudgets)
	if err != nil {
		return nil, "", "", err
	}
	dsSizes, err := encodeItems(e, "daemonSets", s.DaemonSets)
	if err != nil {
		return nil, "", "", err
	}
	foreignSizes, err := encodeItems(e, "foreignNodeClaims", s.ForeignNodeClaims)
	if err != nil {
		return nil, "", "", err
	}
	csiSizes, err := encodeItems(e, "csiNodes", s.CSINodes)
	if err != nil {
		return nil, "", "", err
	}
	claimSizes, err := encodeItems(e, "claims", s.Volumes.Claims)
	if err != nil {
		return nil, "", "", err
	}
	pvSizes, err := encodeItems(e, "persistentVolumes", s.Volumes.PersistentVolumes)
	if err != nil {
		return nil, "", "", err
	}
	classSizes, err := encodeItems(e, "storageClasses", s.Volumes.StorageClasses)
	if err != nil {
		return nil, "", "", err
	}
	hash, decision = e.sums()
	snapshotID, size := IDOfHash("cs", at, hash), e.size

	// Each item kind is chunked on its own; parts are then filled from the
	// chunks in order, so most snapshots are one part.
	nodeChunks, err := chunkSized(s.Nodes, nodeSizes, v1.MaxNodesPerMessage, v1.MaxMessageBytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("split snapshot nodes: %w", err)
	}
	podChunks, err := chunkSized(s.Pods, podSizes, v1.MaxPodsPerSnapshotPart, v1.MaxMessageBytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("split snapshot pods: %w", err)
	}
	pdbChunks, err := chunkSized(s.PodDisruptionBudgets, pdbSizes, v1.MaxPodsPerSnapshotPart, v1.MaxMessageBytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("split snapshot PDBs: %w", err)
	}
	dsChunks, err := chunkSized(s.DaemonSets, dsSizes, v1.MaxPodsPerSnapshotPart, v1.MaxMessageBytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("split snapshot daemonsets: %w", err)
	}
	foreignChunks, err := chunkSized(s.ForeignNodeClaims, foreignSizes, v1.MaxNodesPerMessage, v1.MaxMessageBytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("split snapshot foreign nodeclaims: %w", err)
	}
	csiChunks, err := chunkSized(s.CSINodes, csiSizes, v1.MaxNodesPerMessage, v1.MaxMessageBytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("split snapshot csinodes: %w", err)
	}
	claimChunks, err := chunkSized(s.Volumes.Claims, claimSizes, v1.MaxPodsPerSnapshotPart, v1.MaxMessageBytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("split snapshot claims: %w", err)
	}
	pvChunks, err := chunkSized(s.Volumes.PersistentVolumes, pvSizes, v1.MaxPodsPerSnapshotPart, v1.MaxMessageBytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("split snapshot persistent volumes: %w", err)
	}
	classChunks, err := chunkSized(s.Volumes.StorageClasses, classSizes, v1.MaxPodsPerSnapshotPart, v1.MaxMessageBytes)
	if err != nil {
		return nil, "", "", fmt.Errorf("split snapshot storage classes: %w", err)
	}
	if size+envelopeBytes <= v1.MaxMessageBytes && len(nodeChunks) <= 1 && len(podChunks) <= 1 && len(foreignChunks) <= 1 && len(csiChunks) <= 1 {
		parts = []v1.ClusterSnapshot{s}
	} else {
		for _, c := range nodeChunks {
			parts = append(parts, v1.ClusterSnapshot{Nodes: c})
		}
		for _, c := range podChunks {
			parts = append(parts, v1.ClusterSnapshot{Pods: c})
		}
		for _, c := range pdbChunks {
			parts = append(parts, v1.ClusterSnapshot{PodDisruptionBudgets: c})
		}
		for _, c := range dsChunks {
			parts = append(parts, v1.ClusterSnapshot{DaemonSets: c})
		}
		for _, c := range foreignChunks {
			parts = append(parts, v1.ClusterSnapshot{ForeignNodeClaims: c})
		}
		for _, c := range csiChunks {
			parts = append(parts, v1.ClusterSnapshot{CSINodes: c})
		}
		for _, c := range claimChunks {
			parts = append(parts, v1.ClusterSnapshot{Volumes: v1.VolumeObjects{Claims: c}})
		}
		for _, c := range pvChunks {
			parts = append(parts, v1.ClusterSnapshot{Volumes: v1.VolumeObjects{PersistentVolumes: c}})
		}
		for _, c := range classChunks {
			parts = append(parts, v1.ClusterSnapshot{Volumes: v1.VolumeObjects{StorageClasses: c}})
		}
	}
	if len(parts) > v1.MaxSnapshotParts {
		return nil, "", "", fmt.Errorf("snapshot needs %d parts, limit %d: %w", len(parts), v1.MaxSnapshotParts, v1.ErrMessageTooLarge)
	}
	for i := range parts {
		parts[i].TypeMeta = metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindClusterSnapshot}
		parts[i].ID = snapshotID + "-" + strconv.Itoa(i)
		parts[i].Cluster = cluster
		parts[i].CreatedAt = metav1.NewTime(at)
		parts[i].SnapshotID = snapshotID
		parts[i].Part = i
		parts[i].Parts = len(parts)
	}
	return parts, hash, decision, nil
}

func compareNames(ns1, n1, ns2, n2 string) int {
	return cmp.Or(cmp.Compare(ns1, ns2), cmp.Compare(n1, n2))
}

// SummarizePDB returns the wire summary of a policy/v1 PodDisruptionBudget.
func SummarizePDB(pdb *policyv1.PodDisruptionBudget) v1.PDBSummary {
	s := v1.PDBSummary{
		Name:               pdb.Name,
		Namespace:          pdb.Namespace,
		UID:                pdb.UID,
		Selector:           pdb.Spec.Selector.DeepCopy(),
		DisruptionsAllowed: pdb.Status.DisruptionsAllowed,
		CurrentHealthy:     pdb.Status.CurrentHealthy,
		DesiredHealthy:     pdb.Status.DesiredHealthy,
		ExpectedPods:       pdb.Status.ExpectedPods,
	}
	if pdb.Spec.MinAvailable != nil {
		v := *pdb.Spec.MinAvailable
		s.MinAvailable = &v
	}
	if pdb.Spec.MaxUnavailable != nil {
		v := *pdb.Spec.MaxUnavailable
		s.MaxUnavailable = &v
	}
	if pdb.Spec.UnhealthyPodEvictionPolicy != nil {
		s.UnhealthyPodEvictionPolicy = string(*pdb.Spec.UnhealthyPodEvictionPolicy)
	}
	return s
}

// SummarizeDaemonSet returns the wire summary of a DaemonSet: its pod
// template as a pod named after the DaemonSet.
func SummarizeDaemonSet(ds *appsv1.DaemonSet) v1.DaemonSetSummary {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ds.Name,
			Namespace:   ds.Namespace,
			Labels:      ds.Spec.Template.Labels,
			Annotations: ds.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptr(true),
			}},
		},
		Spec: ds.Spec.Template.Spec,
	}
	return v1.DaemonSetSummary{Name: ds.Name, Namespace: ds.Namespace, UID: ds.UID, Template: v1.SummarizePod(pod)}
}

// PodsByUID indexes a batch's pods for turning answers into events.
func PodsByUID(batches []v1.PodBatch) map[types.UID]v1.PodSummary {
	out := map[types.UID]v1.PodSummary{}
	for _, b := range batches {
		for _, p := range b.Pods {
			out[p.UID] = p
		}
	}
	return out
}

func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func ptr[T any](v T) *T { return &v }

// snapshotHashes accumulates a snapshot's content hash and decision hash
// from its items' encodings (Snapshot), and their encoded size.
type snapshotHashes struct {
	content, decision hash.Hash
	// pods are the digests of the pods' decision encodings, hashed sorted
	// (the pods as a set) by sums.
	pods [][sha256.Size]byte
	size int
}

func newSnapshotHashes() *snapshotHashes {
	return &snapshotHashes{content: sha256.New(), decision: sha256.New()}
}

// kindOverhead is room for a kind's field name and brackets in a
// snapshot's encoding.
const kindOverhead = 32

// encodeItems encodes each item once, writing kind and the encodings into
// both hashes, and returns each item's size with its comma.
func encodeItems[T any](e *snapshotHashes, kind string, items []T) ([]int, error) {
	for _, h := range []hash.Hash{e.content, e.decision} {
		h.Write([]byte("\x00" + kind))
	}
	e.size += kindOverhead
	sizes := make([]int, len(items))
	for i, it := range items {
		data, err := json.Marshal(it)
		if err != nil {
			return nil, fmt.Errorf("encode snapshot %s item %d: %w", kind, i, err)
		}
		for _, h := range []hash.Hash{e.content, e.decision} {
			h.Write([]byte{0})
			h.Write(data)
		}
		sizes[i] = len(data) + 1
		e.size += sizes[i]
	}
	return sizes, nil
}

// encodePods encodes each pod once: without its name, UID and creation
// time unless it has karpenter.sh/do-not-disrupt (the decision encoding,
// whose digest the decision hash takes), the content hash taking that
// encoding and the three fields apart. Each size is the full encoding's,
// computed from the parts, with its comma.
func encodePods(e *snapshotHashes, pods []v1.PodSummary) ([]int, error) {
	e.content.Write([]byte("\x00pods"))
	e.size += kindOverhead
	sizes := make([]int, len(pods))
	e.pods = make([][sha256.Size]byte, 0, len(pods))
	for i, p := range pods {
		q := p.WithoutIdentity()
		keep := q.Name != ""
		data, err := json.Marshal(q)
		if err != nil {
			return nil, fmt.Errorf("encode pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		e.pods = append(e.pods, sha256.Sum256(data))
		e.content.Write([]byte{0})
		e.content.Write(data)
		size := len(data) + 1
		if !keep {
			ident, err := json.Marshal([]any{p.Name, p.UID, p.CreationTimestamp})
			if err != nil {
				return nil, fmt.Errorf("encode pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			e.content.Write(ident)
			// The blanked fields encode as "", "" and null; the full
			// ones as ident's three values (ident adds [ ] and 2 commas).
			size += len(ident) - 4 - len(`""""null`)
		}
		sizes[i] = size
		e.size += size
	}
	return sizes, nil
}

// sums returns the content and decision hashes, hex.
func (e *snapshotHashes) sums() (content, decision string) {
	slices.SortFunc(e.pods, func(a, b [sha256.Size]byte) int { return bytes.Compare(a[:], b[:]) })
	e.decision.Write([]byte("\x00pods"))
	for _, d := range e.pods {
		e.decision.Write(d[:])
	}
	return hex.EncodeToString(e.content.Sum(nil)), hex.EncodeToString(e.decision.Sum(nil))
}
