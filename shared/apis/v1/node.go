package v1

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// providerIDPrefix starts every AWS provider ID.
const providerIDPrefix = "aws:///"

// ErrInvalidProviderID is wrapped by ParseProviderID for a provider ID that
// is not "aws:///<zone>/<instance-id>".
var ErrInvalidProviderID = errors.New("invalid providerID")

// ProviderID returns the Kubernetes provider ID of the EC2 instance
// instanceID in zone: "aws:///<zone>/<instance-id>", the form the AWS cloud
// provider writes to a Node's spec.providerID and Karpenter to a
// NodeClaim's status.providerID (aws: pkg/utils/utils.go).
func ProviderID(zone, instanceID string) string { return providerIDPrefix + zone + "/" + instanceID }

// ParseProviderID splits an AWS provider ID "aws:///<zone>/<instance-id>"
// into its zone and instance ID (aws: pkg/utils/utils.go ParseInstanceID),
// e.g. "aws:///us-east-1a/i-0123" -> "us-east-1a", "i-0123". Any other form
// (no zone, an ID not starting "i-", a further "/" or a "#") is an error
// wrapping ErrInvalidProviderID that names the input.
func ParseProviderID(providerID string) (zone, instanceID string, err error) {
	rest, ok := strings.CutPrefix(providerID, providerIDPrefix)
	if ok {
		zone, instanceID, ok = strings.Cut(rest, "/")
	}
	if !ok || zone == "" || !strings.HasPrefix(instanceID, "i-") || strings.ContainsAny(instanceID, "/#") {
		return "", "", fmt.Errorf("providerID %q: want aws:///<zone>/<instance-id>: %w", providerID, ErrInvalidProviderID)
	}
	return zone, instanceID, nil
}

// NodeReady reports whether the Node's Ready condition is True (the
// kubelet's NodeReady; a Node without the condition is not ready).
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DisruptedTaint returns karpenter.sh/disrupted:NoSchedule, the taint
// Karpenter puts on disruption candidates and terminating Nodes
// (karpenter-spec 1.5).
func DisruptedTaint() corev1.Taint {
	return corev1.Taint{Key: TaintKeyDisrupted, Effect: corev1.TaintEffectNoSchedule}
}

// IsDisruptedTaint reports whether t is DisruptedTaint (key and effect;
// the value and time added do not matter).
func IsDisruptedTaint(t corev1.Taint) bool {
	return t.Key == TaintKeyDisrupted && t.Effect == corev1.TaintEffectNoSchedule
}

// HasDisruptedTaint reports whether n carries DisruptedTaint.
func HasDisruptedTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, IsDisruptedTaint)
}

// ToleratesDisruptedTaint reports whether t tolerates DisruptedTaint, by
// the Toleration API's rules: an empty key with operator Exists matches
// every key, an empty effect every effect; Exists ignores the value, Equal
// (the default) compares it (the taint's is empty).
func ToleratesDisruptedTaint(t corev1.Toleration) bool {
	if t.Effect != "" && t.Effect != corev1.TaintEffectNoSchedule {
		return false
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		return t.Key == "" || t.Key == TaintKeyDisrupted
	case corev1.TolerationOpEqual, "":
		return t.Key == TaintKeyDisrupted && t.Value == ""
	}
	return false
}
