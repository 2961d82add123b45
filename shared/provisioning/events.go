package provisioning

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/launch"
)

// Event reasons of a provisioning round (karpenter: pkg/events/reason.go;
// karpenter-spec.md sections 3, 4 and 10.2).
const (
	// EventNoCompatibleInstanceTypes is Karpenter's Warning on a NodePool
	// whose requirements filter out every instance type with an available
	// offering.
	EventNoCompatibleInstanceTypes = "NoCompatibleInstanceTypes"
	// EventInsufficientCapacityError is Karpenter's Warning on a NodeClaim
	// whose launch failed because EC2 had no capacity for any of its
	// offerings (the NodeClaim is deleted).
	EventInsufficientCapacityError = "InsufficientCapacityError"
	// EventNodeClassNotReady is Karpenter's Warning on a NodeClaim whose
	// EC2NodeClass is missing or not ready at launch (the NodeClaim is
	// deleted).
	EventNodeClassNotReady = "NodeClassNotReady"
)

// NoCompatibleInstanceTypesWindow is how long one NodePool's
// NoCompatibleInstanceTypes event stands for every solve that repeats it:
// Karpenter deduplicates the event per NodePool for one minute.
const NoCompatibleInstanceTypesWindow = time.Minute

// Events are the event records one Provision call is due to write, in
// order: NoCompatibleInstanceTypes (Warning, on the NodePool, Karpenter's
// message "NodePool requirements filtered out all compatible available
// instance types") for each of res.NoCompatibleInstanceTypes, then, per
// launch, InsufficientCapacityError or NodeClassNotReady (Warning, on the
// NodeClaim, Karpenter's message shape "NodeClaim <name> event: <error>")
// for a launch that ended InsufficientCapacity or NodeClassNotReady. Other
// launch statuses record nothing. IDs are derived from what happened: a
// NodeClaim's event from its reason and name (names are unique per batch,
// so a redelivered batch rewrites the same record), a NodePool's from its
// name and the NoCompatibleInstanceTypesWindow now falls in, so solves
// repeated within a minute rewrite one record and the forwarder emits it
// once.
func Events(res Result, now time.Time) []v1.EventRecord {
	var out []v1.EventRecord
	ts := metav1.NewTime(now)
	window := now.UTC().Truncate(NoCompatibleInstanceTypesWindow).Format("20060102T1504")
	for _, pool := range res.NoCompatibleInstanceTypes {
		out = append(out, v1.EventRecord{
			ID:   EventNoCompatibleInstanceTypes + ":" + pool + ":" + window,
			Time: ts, Type: corev1.EventTypeWarning, Reason: EventNoCompatibleInstanceTypes, NodePool: pool,
			Message: "NodePool requirements filtered out all compatible available instance types",
		})
	}
	for _, l := range res.Launches {
		var reason string
		switch l.Status {
		case launch.InsufficientCapacity:
			reason = EventInsufficientCapacityError
		case launch.NodeClassNotReady:
			reason = EventNodeClassNotReady
		default:
			continue
		}
		out = append(out, v1.EventRecord{
			ID:   reason + ":" + l.NodeClaim,
			Time: ts, Type: corev1.EventTypeWarning, Reason: reason, NodeClaim: l.NodeClaim,
			Message: fmt.Sprintf("NodeClaim %s event: %s", l.NodeClaim, l.Reason),
		})
	}
	return out
}
