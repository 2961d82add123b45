package termination

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/workflow"
)

// AwaitedAttachments returns the VolumeAttachments a drained Node's
// termination waits for, by Karpenter's rule (karpenter-spec section 5.2
// "Volume detachment", checklist item 23): every attachment of a
// PersistentVolume except those in ignored, the volumes of the pods the
// drain does not move (see Service.Drain). Attachments without a
// PersistentVolume name (inline volumes) are not waited for either, as in
// Karpenter. The result keeps the input's order; it is pure.
func AwaitedAttachments(attachments []storagev1.VolumeAttachment, ignored map[string]bool) []storagev1.VolumeAttachment {
	var out []storagev1.VolumeAttachment
	for _, va := range attachments {
		pv := va.Spec.Source.PersistentVolumeName
		if pv == nil || ignored[*pv] {
			continue
		}
		out = append(out, va)
	}
	return out
}

// claimNames returns the PersistentVolumeClaims pod's volumes use: the
// claimName of a persistentVolumeClaim volume, and "<pod>-<volume>" for a
// generic ephemeral volume (the name Kubernetes gives the claim it
// creates for one).
func claimNames(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, p.Name+"-"+v.Name)
		}
	}
	return out
}

// awaitVolumes is the step after a Node's drain, before its termination:
// it reports the Node drained once no VolumeAttachment it waits for
// (AwaitedAttachments) is left, or at once when the termination deadline
// (nd.Deadline) has passed, without reading the attachments, as Karpenter
// stops waiting when the terminationGracePeriod has elapsed, or when the
// Node object is gone (attachments may outlive it; Karpenter waits only
// while it holds the Node's finalizer). Otherwise the Node stays undrained
// and the state machine polls again after the drain pause. pods are the Node's pods of this round: the volumes of those that
// are not drainable (Rules.Drainable) are ignored, through their claims'
// bound volumes; a claim that is gone is skipped. It reports progress when
// fewer attachments are left than in the previous round.
func (s *Service) awaitVolumes(ctx context.Context, st workflow.DisruptionState, nd workflow.NodeDrain, pods []corev1.Pod, now time.Time) (workflow.NodeDrain, bool, error) {
	if nd.Deadline != nil && !now.Before(*nd.Deadline) {
		nd.Drained = true
		nd.Volumes = &workflow.VolumeDetachment{Status: workflow.VolumesGracePeriodElapsed}
		return nd, false, nil
	}
	if s.p.Volumes == nil {
		return nd, false, errors.New("volume detachment: no volume port")
	}
	attachments, err := s.p.Volumes.ListVolumeAttachments(ctx, nd.Node)
	if err != nil {
		return nd, false, fmt.Errorf("volume detachment of %s: %w", nd.Node, err)
	}
	if len(attachments) > 0 {
		_, err := s.p.Nodes.GetNode(ctx, nd.Node)
		switch {
		case errors.Is(err, v1.ErrNotFound):
			nd.Drained = true
			nd.Volumes = &workflow.VolumeDetachment{Status: workflow.VolumesNodeGone}
			return nd, false, nil
		case err != nil:
			return nd, false, fmt.Errorf("volume detachment of %s: %w", nd.Node, err)
		}
	}
	var waited []storagev1.VolumeAttachment
	if len(attachments) > 0 {
		ignored := map[string]bool{}
		for i := range pods {
			p := &pods[i]
			if s.p.Rules.Drainable(p, now) {
				continue
			}
			for _, claim := range claimNames(p) {
				pv, err := s.p.Volumes.BoundVolume(ctx, p.Namespace, claim)
				switch {
				case errors.Is(err, v1.ErrNotFound):
					continue
				case err != nil:
					return nd, false, fmt.Errorf("volume detachment of %s: %w", nd.Node, err)
				}
				if pv != "" {
					ignored[pv] = true
				}
			}
		}
		waited = AwaitedAttachments(attachments, ignored)
	}
	before := volumesBefore(st.Drain, nd.NodeClaim)
	if len(waited) == 0 {
		nd.Drained = true
		nd.Volumes = &workflow.VolumeDetachment{Status: workflow.VolumesDetached}
		return nd, before > 0, nil
	}
	names := make([]string, 0, len(waited))
	for _, va := range waited {
		names = append(names, va.Name+" ("+*va.Spec.Source.PersistentVolumeName+")")
	}
	slices.Sort(names)
	nd.Volumes = &workflow.VolumeDetachment{
		Status:      workflow.VolumesAwaitingDetachment,
		Remaining:   len(waited),
		Attachments: names[:min(len(names), workflow.MaxListedAttachments)],
	}
	return nd, before > len(waited), nil
}

// volumesBefore is the number of attachments the previous round left on
// nodeClaim's Node, 0 when it waited for none.
func volumesBefore(prev *workflow.DrainOutput, nodeClaim string) int {
	if prev == nil {
		return 0
	}
	for _, n := range prev.Nodes {
		if n.NodeClaim == nodeClaim && n.Volumes != nil {
			return n.Volumes.Remaining
		}
	}
	return 0
}
