package launch_test

import (
	"slices"
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

func TestNarrowLeavesSharedOfferingsUntouched(t *testing.T) {
	offer := func(zone, ct string, price float64) catalog.Offering {
		return catalog.Offering{Zone: zone, CapacityType: ct, Price: price, Available: true}
	}
	mk := func(name string, offers ...catalog.Offering) *catalog.InstanceType {
		return &catalog.InstanceType{Name: name, Labels: map[string]string{"node.kubernetes.io/instance-type": name}, Offerings: offers}
	}
	// b's spot offerings cost more than a's on-demand one, so the
	// spot-price filter drops them: once from Arrange's layout (spot last),
	// once from a layout with spot first.
	a := mk("a", offer("z1", "on-demand", 1), offer("z1", "spot", 0.5))
	arranged := mk("b", offer("z1", "on-demand", 3), offer("z2", "spot", 2), offer("z1", "spot", 2.5))
	mixed := mk("c", offer("z1", "spot", 2.5), offer("z1", "on-demand", 4), offer("z2", "spot", 2))
	for _, it := range []*catalog.InstanceType{a, arranged, mixed} {
		before := slices.Clone(it.Offerings)
		cands := []launch.Candidate{{Type: a, Offerings: a.Offerings}, {Type: it, Offerings: it.Offerings}}
		var rej []launch.Rejection
		kept := launch.Narrow(requirements.Requirements{}, cands, 0, &rej)
		if diff := cmp.Diff(before, it.Offerings); diff != "" {
			t.Errorf("%s: Narrow wrote to the offerings it was given (-before +after):\n%s", it.Name, diff)
		}
		if it == a {
			continue
		}
		if len(kept) != 2 || len(kept[1].Offerings) != 1 || kept[1].Offerings[0].CapacityType != "on-demand" {
			t.Errorf("%s: kept %+v, want a, then %s with only its on-demand offering", it.Name, kept, it.Name)
		}
		if launch.Narrow(requirements.Requirements{}, []launch.Candidate{{Type: it, Offerings: it.Offerings}}, 0, nil) == nil {
			t.Errorf("%s: Narrow without a rejection list dropped the only candidate", it.Name)
		}
	}
}

func TestChooseIntoPlansAsChooseInTheGivenBuffer(t *testing.T) {
	it := &catalog.InstanceType{Name: "a", Offerings: catalog.Offerings{
		{Zone: "z2", CapacityType: "spot", Price: 1, Available: true},
		{Zone: "z1", CapacityType: "spot", Price: 1, Available: true},
		{Zone: "z1", CapacityType: "on-demand", Price: 2, Available: true},
	}}
	cands := []launch.Candidate{{Type: it, Offerings: it.Offerings}}
	buf := make([]launch.Offering, 0, 8)
	got := launch.ChooseInto(buf, cands)
	if diff := cmp.Diff(launch.Choose(cands), got); diff != "" {
		t.Errorf("ChooseInto() differs from Choose() (-want +got):\n%s", diff)
	}
	if &got.Offerings[:1][0] != &buf[:1][0] {
		t.Errorf("ChooseInto() did not build the offerings in the buffer it was given")
	}
}
