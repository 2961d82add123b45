package kube

import (
	"context"
	"errors"
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ListVolumeAttachments returns the storage.k8s.io/v1 VolumeAttachments
// whose spec.nodeName is node: the volumes the attach/detach controller
// (or a CSI driver) still has attached to the Node, which Karpenter's
// termination waits for before it terminates the instance (karpenter-spec
// 5.2 "Volume detachment", 11.3 item 23). The API server offers no field
// selector on spec.nodeName for VolumeAttachments, so the list is read in
// pages of ListPageSize and filtered here, as Karpenter filters its cached
// list by an index on spec.nodeName. Attachments of other Nodes are never
// returned; none yields an empty list.
func (c *Client) ListVolumeAttachments(ctx context.Context, node string) ([]storagev1.VolumeAttachment, error) {
	if node == "" {
		return nil, errors.New("list volumeattachments: empty node name")
	}
	all, err := listAll(ctx, metav1.ListOptions{}, func(ctx context.Context, o metav1.ListOptions) ([]storagev1.VolumeAttachment, string, error) {
		l, err := c.cs.StorageV1().VolumeAttachments().List(ctx, o)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list volumeattachments of node %s: %w", node, err)
	}
	var kept []storagev1.VolumeAttachment
	for _, va := range all {
		if va.Spec.NodeName == node {
			kept = append(kept, va)
		}
	}
	return kept, nil
}

// BoundVolume returns the name of the PersistentVolume the
// PersistentVolumeClaim namespace/name is bound to (its spec.volumeName),
// "" while it is unbound. A claim that does not exist is an error matching
// ErrNotFound.
func (c *Client) BoundVolume(ctx context.Context, namespace, name string) (string, error) {
	pvc, err := c.cs.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("get persistentvolumeclaim %s/%s: %w: %w", namespace, name, ErrNotFound, err)
	case err != nil:
		return "", fmt.Errorf("get persistentvolumeclaim %s/%s: %w", namespace, name, err)
	}
	return pvc.Spec.VolumeName, nil
}
