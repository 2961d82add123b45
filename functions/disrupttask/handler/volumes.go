package handler

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nodewright/nodewright/shared/kube"
)

// ListVolumeAttachments lists the VolumeAttachments of a Node, for the
// wait for volume detachment after its drain.
func (k Kube) ListVolumeAttachments(ctx context.Context, node string) ([]storagev1.VolumeAttachment, error) {
	l, err := k.Client.ListVolumeAttachments(ctx, node)
	return l, kubeErr(err)
}

// BoundVolume reads the PersistentVolume a claim is bound to; a claim that
// is gone matches termination.ErrNotFound.
func (k Kube) BoundVolume(ctx context.Context, namespace, name string) (string, error) {
	pv, err := k.Client.BoundVolume(ctx, namespace, name)
	return pv, kubeErr(err)
}

// Drainable is kube.Drainable.
func (Kube) Drainable(pod *corev1.Pod, now time.Time) bool { return kube.Drainable(pod, now) }
