package scheduling

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Volumes are the storage objects the pods' volumes refer to (pending
// pods' and existing nodes' pods'). Only pods that use a
// PersistentVolumeClaim (directly or through a generic ephemeral volume)
// read them; the zero value suits input whose pods use none. An object
// listed twice is read as its last listing.
type Volumes struct {
	// Claims are the PersistentVolumeClaims of the pods' namespaces.
	Claims []corev1.PersistentVolumeClaim
	// PersistentVolumes are the volumes bound claims name.
	PersistentVolumes []corev1.PersistentVolume
	// StorageClasses are the classes unbound claims name.
	StorageClasses []storagev1.StorageClass
}

// With returns v and newer together: where both hold an object of the
// same name (a claim of the same namespace/name), newer's is the one the
// solver reads. Neither is changed.
func (v Volumes) With(newer Volumes) Volumes {
	if len(v.Claims)+len(v.PersistentVolumes)+len(v.StorageClasses) == 0 {
		return newer
	}
	return Volumes{
		Claims:            append(slices.Clip(v.Claims), newer.Claims...),
		PersistentVolumes: append(slices.Clip(v.PersistentVolumes), newer.PersistentVolumes...),
		StorageClasses:    append(slices.Clip(v.StorageClasses), newer.StorageClasses...),
	}
}

// volumeIndex finds claims, volumes and classes by name.
type volumeIndex struct {
	claims  map[string]*corev1.PersistentVolumeClaim // namespace/name
	volumes map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
}

func newVolumeIndex(v Volumes) volumeIndex {
	ix := volumeIndex{
		claims:  make(map[string]*corev1.PersistentVolumeClaim, len(v.Claims)),
		volumes: make(map[string]*corev1.PersistentVolume, len(v.PersistentVolumes)),
		classes: make(map[string]*storagev1.StorageClass, len(v.StorageClasses)),
	}
	for i := range v.Claims {
		c := &v.Claims[i]
		ix.claims[c.Namespace+"/"+c.Name] = c
	}
	for i := range v.PersistentVolumes {
		ix.volumes[v.PersistentVolumes[i].Name] = &v.PersistentVolumes[i]
	}
	for i := range v.StorageClasses {
		ix.classes[v.StorageClasses[i].Name] = &v.StorageClasses[i]
	}
	return ix
}

// volumeRequirements returns the node requirements pod's volumes add, as
// Karpenter's volume topology does (karpenter: pkg/controllers/provisioning/
// scheduling/volumetopology.go; karpenter-spec section 3): a bound claim
// adds its PersistentVolume's first required node-affinity term (less
// kubernetes.io/hostname for local and hostPath volumes), an unbound claim
// of a WaitForFirstConsumer StorageClass adds the class's first
// allowedTopologies term as In requirements. why is set, and the pod is not
// provisioned for, when a claim cannot be scheduled for yet: the claim, its
// volume or its class does not exist, the claim is being deleted or Lost,
// it is bound without pv.kubernetes.io/bind-completed, it is unbound with
// no storageClassName, or its class binds Immediately (the volume
// provisioner binds it first). A generic ephemeral volume's claim is named
// <pod>-<volume>; until it exists its template stands in for it. Pods
// without claim volumes cost one loop over their volumes.
func (ix volumeIndex) volumeRequirements(pod *corev1.Pod) (reqs []corev1.NodeSelectorRequirement, why string) {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		claimName, ok := v1.ClaimName(pod, vol)
		if !ok {
			continue
		}
		var template *corev1.PersistentVolumeClaimSpec
		if vol.Ephemeral != nil && vol.Ephemeral.VolumeClaimTemplate != nil {
			template = &vol.Ephemeral.VolumeClaimTemplate.Spec
		}
		id := fmt.Sprintf("PersistentVolumeClaim %s/%s (volume %q)", pod.Namespace, claimName, vol.Name)
		claim, ok := ix.claims[pod.Namespace+"/"+claimName]
		var spec *corev1.PersistentVolumeClaimSpec
		switch {
		case ok:
			switch {
			case claim.DeletionTimestamp != nil:
				return nil, "waiting for volumes: " + id + " is being deleted"
			case claim.Status.Phase == corev1.ClaimLost:
				return nil, "waiting for volumes: " + id + " is Lost (its PersistentVolume is gone)"
			}
			spec = &claim.Spec
		case template != nil:
			spec = template
		default:
			return nil, "waiting for volumes: " + id + " does not exist"
		}
		if spec.VolumeName != "" {
			if ok && claim.Annotations[v1.AnnotationBindCompleted] == "" {
				return nil, "waiting for volumes: " + id + " is not fully bound yet (no " + v1.AnnotationBindCompleted + " annotation)"
			}
			pv, found := ix.volumes[spec.VolumeName]
			if !found {
				return nil, fmt.Sprintf("waiting for volumes: PersistentVolume %q of %s does not exist", spec.VolumeName, id)
			}
			reqs = append(reqs, pvRequirements(pv)...)
			continue
		}
		if spec.StorageClassName == nil || *spec.StorageClassName == "" {
			return nil, "waiting for volumes: " + id + " is unbound and names no storageClassName"
		}
		sc, found := ix.classes[*spec.StorageClassName]
		if !found {
			return nil, fmt.Sprintf("waiting for volumes: StorageClass %q of %s does not exist", *spec.StorageClassName, id)
		}
		if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
			return nil, fmt.Sprintf("waiting for volumes: %s is unbound and StorageClass %q binds Immediately (its provisioner binds the claim before the pod can be scheduled)", id, sc.Name)
		}
		if len(sc.AllowedTopologies) > 0 {
			for _, e := range sc.AllowedTopologies[0].MatchLabelExpressions {
				reqs = append(reqs, corev1.NodeSelectorRequirement{Key: e.Key, Operator: corev1.NodeSelectorOpIn, Values: e.Values})
			}
		}
	}
	return reqs, ""
}

// pvRequirements is a PersistentVolume's first required node-affinity
// term; a local or hostPath volume's hostname requirement is left out, as
// Karpenter leaves it out (a new node can never have that hostname).
func pvRequirements(pv *corev1.PersistentVolume) []corev1.NodeSelectorRequirement {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) == 0 {
		return nil
	}
	reqs := na.Required.NodeSelectorTerms[0].MatchExpressions
	if pv.Spec.Local == nil && pv.Spec.HostPath == nil {
		return reqs
	}
	var out []corev1.NodeSelectorRequirement
	for _, r := range reqs {
		if r.Key != corev1.LabelHostname {
			out = append(out, r)
		}
	}
	return out
}

// volumeKey renders volume requirements for a class key.
func volumeKey(reqs []corev1.NodeSelectorRequirement) string {
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString(r.Key)
		b.WriteByte(0)
		b.WriteString(string(r.Operator))
		b.WriteByte(0)
		b.WriteString(strings.Join(r.Values, ","))
		b.WriteByte(0)
	}
	return b.String()
}

// volumeUse is one claim a pod's volume names and the CSI driver that
// attaches it.
type volumeUse struct {
	driver string
	claim  string // namespace/name
}

// volumeUses returns the claims of pod's volumes with their CSI driver: a
// bound claim's PersistentVolume's spec.csi.driver, an unbound claim's
// StorageClass provisioner (a generic ephemeral volume's template stands
// in for its claim until it exists), as Karpenter's volume usage resolves
// them (karpenter: pkg/scheduling/volumeusage.go). A claim whose driver
// cannot be found (claim, volume or class absent, or a volume that is not
// CSI) is not counted.
func (ix volumeIndex) volumeUses(pod *corev1.Pod) []volumeUse {
	var out []volumeUse
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		claimName, ok := v1.ClaimName(pod, vol)
		if !ok {
			continue
		}
		key := pod.Namespace + "/" + claimName
		var spec *corev1.PersistentVolumeClaimSpec
		if claim, found := ix.claims[key]; found {
			spec = &claim.Spec
		} else if vol.Ephemeral != nil && vol.Ephemeral.VolumeClaimTemplate != nil {
			spec = &vol.Ephemeral.VolumeClaimTemplate.Spec
		} else {
			continue
		}
		var driver string
		switch {
		case spec.VolumeName != "":
			if pv := ix.volumes[spec.VolumeName]; pv != nil && pv.Spec.CSI != nil {
				driver = pv.Spec.CSI.Driver
			}
		case spec.StorageClassName != nil:
			if sc := ix.classes[*spec.StorageClassName]; sc != nil {
				driver = sc.Provisioner
			}
		}
		if driver != "" {
			out = append(out, volumeUse{driver: driver, claim: key})
		}
	}
	return out
}

// attachments counts the volumes attached to an existing node per CSI
// driver against the node's limits (ExistingNode.VolumeLimits).
type attachments struct {
	limits map[string]int
	used   map[string]map[string]bool // driver -> claim keys
}

// exceeds returns the first driver whose limit the node would pass with
// uses added, counting each claim once, whether already on the node or
// named twice (karpenter: VolumeUsage.ExceedsLimits); a driver without a
// limit is never exceeded.
func (a *attachments) exceeds(uses []volumeUse) (driver string, limit int) {
	var added map[string]map[string]bool
	for _, u := range uses {
		limit, ok := a.limits[u.driver]
		if !ok || a.used[u.driver][u.claim] || added[u.driver][u.claim] {
			continue
		}
		if added == nil {
			added = map[string]map[string]bool{}
		}
		if added[u.driver] == nil {
			added[u.driver] = map[string]bool{}
		}
		added[u.driver][u.claim] = true
		if len(a.used[u.driver])+len(added[u.driver]) > limit {
			return u.driver, limit
		}
	}
	return "", 0
}

// add records uses on the node.
func (a *attachments) add(uses []volumeUse) {
	for _, u := range uses {
		if a.used[u.driver] == nil {
			a.used[u.driver] = map[string]bool{}
		}
		a.used[u.driver][u.claim] = true
	}
}

// volumeIndex indexes in.Volumes at its first use.
func (s *solver) volumeIndex() *volumeIndex {
	if s.vols == nil {
		ix := newVolumeIndex(s.in.Volumes)
		s.vols = &ix
	}
	return s.vols
}
