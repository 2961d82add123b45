package launch_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/requirements"
)

func TestTruncateKeepsMinValues(t *testing.T) {
	mk := func(name, family string) launch.Candidate {
		return launch.Candidate{Type: &catalog.InstanceType{Name: name, Labels: map[string]string{
			"node.kubernetes.io/instance-type": name, "karpenter.k8s.aws/instance-family": family}}}
	}
	mv := 3
	fam := requirements.New("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpExists)
	fam.MinValues = &mv
	r := requirements.NewRequirements(fam)
	tests := []struct {
		name string
		r    requirements.Requirements
		max  int
		want []string
	}{
		{name: "should keep the cheapest without minValues", r: requirements.Requirements{}, max: 3, want: []string{"a.1", "a.2", "a.3"}},
		{name: "should swap in types that bring missing values, in price order", r: r, max: 3, want: []string{"a.1", "b.1", "c.1"}},
		{name: "should fill the rest by price", r: r, max: 4, want: []string{"a.1", "a.2", "b.1", "c.1"}},
		{name: "should keep everything under the cap", r: r, max: 10, want: []string{"a.1", "a.2", "a.3", "b.1", "c.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cands := []launch.Candidate{mk("a.1", "a"), mk("a.2", "a"), mk("a.3", "a"), mk("b.1", "b"), mk("c.1", "c")}
			kept := launch.Narrow(tt.r, cands, tt.max, nil)
			var got []string
			for _, c := range kept {
				got = append(got, c.Type.Name)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Narrow() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
