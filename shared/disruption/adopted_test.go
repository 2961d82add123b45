package disruption_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
)

func TestHoldAdopted(t *testing.T) {
	claims := []v1.NodeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "default-x7k2p", Annotations: map[string]string{v1.AnnotationAdoptedFrom: "karpenter"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "default-own01"}},
	}
	cmds := []disruption.Command{
		{ID: "drift-default-x7k2p-1a2b3c4d", Candidates: []disruption.Candidate{{NodeClaim: "default-x7k2p"}}},
		{ID: "empty-default-own01-5e6f7a8b", Candidates: []disruption.Candidate{{NodeClaim: "default-own01"}}},
	}
	ids := func(cs []disruption.Command) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	tests := []struct {
		name                string
		karpenterActive     string
		wantStart, wantHeld []string
	}{
		{name: "should start every command while Karpenter is stopped",
			wantStart: []string{"drift-default-x7k2p-1a2b3c4d", "empty-default-own01-5e6f7a8b"}},
		{name: "should hold the commands of adopted nodes while Karpenter is active", karpenterActive: "its lease kube-system/karpenter-leader-election was renewed 3s ago",
			wantStart: []string{"empty-default-own01-5e6f7a8b"}, wantHeld: []string{"drift-default-x7k2p-1a2b3c4d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start, held := disruption.HoldAdopted(cmds, claims, tt.karpenterActive)
			if diff := cmp.Diff(tt.wantStart, ids(start)); diff != "" {
				t.Errorf("started mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantHeld, ids(held)); diff != "" {
				t.Errorf("held mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
