package disruption

import v1 "github.com/nodewright/nodewright/shared/apis/v1"

// HoldAdopted splits cmds into those to start and those held. While
// Karpenter's controller is believed active (karpenterActive is not empty,
// as v1.ClusterSnapshot.KarpenterActive reports it), every command with a
// candidate nodewright adopted from it (a NodeClaim of claims annotated
// v1.AnnotationAdoptedFrom) is held: a running Karpenter may act on the same
// node, and two autoscalers must never fight. Otherwise all are started.
// Order is kept.
func HoldAdopted(cmds []Command, claims []v1.NodeClaim, karpenterActive string) (start, held []Command) {
	if karpenterActive == "" {
		return cmds, nil
	}
	adopted := map[string]bool{}
	for i := range claims {
		if claims[i].Annotations[v1.AnnotationAdoptedFrom] != "" {
			adopted[claims[i].Name] = true
		}
	}
	for _, cmd := range cmds {
		hold := false
		for _, c := range cmd.Candidates {
			hold = hold || adopted[c.NodeClaim]
		}
		if hold {
			held = append(held, cmd)
		} else {
			start = append(start, cmd)
		}
	}
	return start, held
}
