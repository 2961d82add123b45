package workflow

// VolumeDetachment is a drained Node's wait for its volumes to detach
// before its instance is terminated: Karpenter's VolumesDetached condition
// and AwaitingVolumeDetachment event (karpenter-spec section 5.2, checklist
// item 23).
type VolumeDetachment struct {
	// Status is one of the Volumes* constants.
	Status string `json:"status"`
	// Remaining counts the VolumeAttachments still waited for.
	Remaining int `json:"remaining,omitempty"`
	// Attachments names them, "<attachment> (<persistent volume>)", at
	// most MaxListedAttachments.
	Attachments []string `json:"attachments,omitempty"`
}

// MaxListedAttachments bounds VolumeDetachment.Attachments.
const MaxListedAttachments = 10

// Statuses of a VolumeDetachment (Karpenter's VolumesDetached condition:
// True, or False with the reason).
const (
	// VolumesDetached: no VolumeAttachment of a drainable pod's volume is
	// left on the Node; it may be terminated.
	VolumesDetached = "VolumesDetached"
	// VolumesAwaitingDetachment: attachments remain; the drain polls
	// again.
	VolumesAwaitingDetachment = "AwaitingVolumeDetachment"
	// VolumesGracePeriodElapsed: the termination deadline passed, so the
	// Node is terminated without waiting (Karpenter's reason
	// TerminationGracePeriodElapsed).
	VolumesGracePeriodElapsed = "TerminationGracePeriodElapsed"
	// VolumesNodeGone: attachments name the Node but the Node object is
	// gone, so nothing waits for them (Karpenter waits only while it
	// holds the Node's finalizer).
	VolumesNodeGone = "NodeGone"
)
