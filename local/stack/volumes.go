package stack

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// VolumeProvisioner is the provisioner name the local stack's stand-in
// volume provisioner serves: a StorageClass naming it gets its claims
// provisioned as the AWS EBS CSI driver's would be.
const VolumeProvisioner = "ebs.csi.aws.com"

// selectedNodeAnnotation is the annotation kube-scheduler's VolumeBinding
// plugin sets on an unbound claim of a WaitForFirstConsumer class once it
// has chosen the consuming pod's Node (k8s.io/component-helpers
// storage/volume AnnSelectedNode).
const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

// volumeProvisioner stands in for a CSI driver's external-provisioner: it
// provisions the pending claims of StorageClasses naming
// VolumeProvisioner. A claim of a WaitForFirstConsumer class is left
// alone until the scheduler's selected-node annotation is on it; then the
// PersistentVolume created for it has required node affinity on that
// Node's zone (topology.kubernetes.io/zone), as an EBS volume lives in one
// Availability Zone. The PersistentVolume is pre-bound to the claim
// (claimRef with its UID) and kube-controller-manager's PersistentVolume
// controller completes the binding, as for an external-provisioner's
// volume. An Immediate class's claim gets a volume in the first zone of
// the class's allowedTopologies (none: no node affinity).
type volumeProvisioner struct {
	kube     kubernetes.Interface
	interval time.Duration
	log      *slog.Logger
}

// run provisions every interval until ctx ends.
func (p volumeProvisioner) run(ctx context.Context) error {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		if err := p.provision(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("provision volumes", "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// provision creates the PersistentVolume of each pending claim it serves
// that is ready for one.
func (p volumeProvisioner) provision(ctx context.Context) error {
	claims, err := p.kube.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list persistentvolumeclaims: %w", err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Spec.VolumeName != "" || c.DeletionTimestamp != nil || c.Spec.StorageClassName == nil {
			continue
		}
		if err := p.provisionClaim(ctx, c); err != nil {
			return fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	return nil
}

func (p volumeProvisioner) provisionClaim(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	class, err := p.kube.StorageV1().StorageClasses().Get(ctx, *c.Spec.StorageClassName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get storageclass: %w", err)
	}
	if class.Provisioner != VolumeProvisioner {
		return nil
	}
	var zone string
	if class.VolumeBindingMode != nil && *class.VolumeBindingMode == "WaitForFirstConsumer" {
		nodeName := c.Annotations[selectedNodeAnnotation]
		if nodeName == "" {
			return nil // the scheduler has not chosen a Node yet
		}
		node, err := p.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("selected node %s: %w", nodeName, err)
		}
		if zone = node.Labels[v1.LabelTopologyZone]; zone == "" {
			return fmt.Errorf("selected node %s has no %s label", nodeName, v1.LabelTopologyZone)
		}
	} else {
		for _, term := range class.AllowedTopologies {
			for _, e := range term.MatchLabelExpressions {
				if e.Key == v1.LabelTopologyZone && len(e.Values) > 0 && zone == "" {
					zone = e.Values[0]
				}
			}
		}
	}
	size := c.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "pvc-" + string(c.UID),
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": VolumeProvisioner},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   c.Spec.AccessModes,
			VolumeMode:                    c.Spec.VolumeMode,
			StorageClassName:              class.Name,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: c.Namespace, Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: VolumeProvisioner, VolumeHandle: "vol-" + string(c.UID)[:8], FSType: "ext4",
			}},
		},
	}
	if zone != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: v1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone},
			}}}},
		}}
	}
	if _, err := p.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create persistentvolume: %w", err)
	}
	p.log.Info("provisioned volume", "persistentvolume", pv.Name, "claim", c.Namespace+"/"+c.Name, "zone", zone)
	return nil
}
