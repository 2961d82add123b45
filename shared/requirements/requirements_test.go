package requirements_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/requirements"
)

// reqs intersects rs into Requirements.
func reqs(rs ...*requirements.Requirement) requirements.Requirements {
	return requirements.NewRequirements(rs...)
}

func TestIntersectsSucceeds(t *testing.T) {
	tests := []struct {
		name string
		a, b requirements.Requirements
	}{
		{name: "empty requirements intersect", a: reqs(), b: reqs()},
		{name: "keys only one side constrains are unconstrained", a: reqs(requirements.New("team", in, "a")), b: reqs(requirements.New("zone", in, "b"))},
		{name: "overlapping In sets intersect", a: reqs(requirements.New(category, in, "c", "m", "r")), b: reqs(requirements.New(category, in, "m"))},
		{name: "In and a NotIn that leaves a value intersect", a: reqs(requirements.New("k", in, "a", "b")), b: reqs(requirements.New("k", notIn, "a"))},
		{name: "NotIn and NotIn intersect even when the excluded sets cover each other", a: reqs(requirements.New("k", notIn, "a")), b: reqs(requirements.New("k", notIn, "a"))},
		{name: "NotIn and DoesNotExist intersect: a node without the label satisfies both", a: reqs(requirements.New("k", notIn, "a")), b: reqs(requirements.New("k", dne))},
		{name: "DoesNotExist and NotIn intersect", a: reqs(requirements.New("k", dne)), b: reqs(requirements.New("k", notIn, "a"))},
		{name: "DoesNotExist and DoesNotExist intersect", a: reqs(requirements.New("k", dne)), b: reqs(requirements.New("k", dne))},
		{name: "Exists and Exists intersect", a: reqs(requirements.New("k", exist)), b: reqs(requirements.New("k", exist))},
		{name: "touching inclusive bounds intersect", a: reqs(requirements.New(cpu, gte, "4")), b: reqs(requirements.New(cpu, lte, "4"))},
		{name: "In within bounds intersects", a: reqs(requirements.New(cpu, gt, "4")), b: reqs(requirements.New(cpu, in, "8", "2"))},
		{name: "NotIn with bounds and bounds intersect", a: reqs(requirements.New(cpu, notIn, "4").Intersection(requirements.New(cpu, gte, "4"))), b: reqs(requirements.New(cpu, lte, "4"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.a.Intersects(tt.b); err != nil {
				t.Errorf("(%s).Intersects(%s) = %v, want nil", tt.a, tt.b, err)
			}
			if err := tt.b.Intersects(tt.a); err != nil {
				t.Errorf("(%s).Intersects(%s) = %v, want nil", tt.b, tt.a, err)
			}
		})
	}
}

func TestIntersectsFails(t *testing.T) {
	tests := []struct {
		name string
		a, b requirements.Requirements
		want string
	}{
		{
			name: "disjoint In sets conflict",
			a:    reqs(requirements.New(category, in, "c", "m", "r")),
			b:    reqs(requirements.New(category, in, "p")),
			want: `requirement "karpenter.k8s.aws/instance-category In [c m r]" conflicts with "karpenter.k8s.aws/instance-category In [p]"`,
		},
		{
			name: "In and DoesNotExist conflict",
			a:    reqs(requirements.New("k", in, "a")),
			b:    reqs(requirements.New("k", dne)),
			want: `requirement "k In [a]" conflicts with "k DoesNotExist"`,
		},
		{
			name: "Exists and DoesNotExist conflict",
			a:    reqs(requirements.New("k", exist)),
			b:    reqs(requirements.New("k", dne)),
			want: `requirement "k Exists" conflicts with "k DoesNotExist"`,
		},
		{
			name: "In and a NotIn that excludes it conflict",
			a:    reqs(requirements.New("k", notIn, "a")),
			b:    reqs(requirements.New("k", in, "a")),
			want: `requirement "k NotIn [a]" conflicts with "k In [a]"`,
		},
		{
			name: "bounds and DoesNotExist conflict",
			a:    reqs(requirements.New(cpu, gt, "4")),
			b:    reqs(requirements.New(cpu, dne)),
			want: `requirement "karpenter.k8s.aws/instance-cpu Exists >=5" conflicts with "karpenter.k8s.aws/instance-cpu DoesNotExist"`,
		},
		{
			name: "NotIn with bounds and DoesNotExist conflict: bounds need a value",
			a:    reqs(requirements.New(cpu, notIn, "8").Intersection(requirements.New(cpu, gt, "4"))),
			b:    reqs(requirements.New(cpu, dne)),
			want: `requirement "karpenter.k8s.aws/instance-cpu NotIn [8] >=5" conflicts with "karpenter.k8s.aws/instance-cpu DoesNotExist"`,
		},
		{
			name: "crossing bounds conflict",
			a:    reqs(requirements.New(cpu, gt, "4")),
			b:    reqs(requirements.New(cpu, lt, "5")),
			want: `requirement "karpenter.k8s.aws/instance-cpu Exists >=5" conflicts with "karpenter.k8s.aws/instance-cpu Exists <=4"`,
		},
		{
			name: "In below a lower bound conflicts",
			a:    reqs(requirements.New(cpu, in, "4")),
			b:    reqs(requirements.New(cpu, gt, "4")),
			want: `requirement "karpenter.k8s.aws/instance-cpu In [4]" conflicts with "karpenter.k8s.aws/instance-cpu Exists >=5"`,
		},
		{
			name: "non-integer values conflict with bounds",
			a:    reqs(requirements.New(cpu, in, "large")),
			b:    reqs(requirements.New(cpu, gte, "0")),
			want: `requirement "karpenter.k8s.aws/instance-cpu In [large]" conflicts with "karpenter.k8s.aws/instance-cpu Exists >=0"`,
		},
		{
			name: "every conflicting key is listed in key order",
			a:    reqs(requirements.New("z", in, "1"), requirements.New("a", in, "1"), requirements.New("m", in, "1")),
			b:    reqs(requirements.New("z", in, "2"), requirements.New("a", in, "2"), requirements.New("m", in, "1")),
			want: `requirement "a In [1]" conflicts with "a In [2]"; requirement "z In [1]" conflicts with "z In [2]"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.a.Intersects(tt.b)
			if err == nil {
				t.Fatalf("(%s).Intersects(%s) = nil, want %q", tt.a, tt.b, tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("(%s).Intersects(%s) error mismatch (-want +got):\n%s", tt.a, tt.b, diff)
			}
			var ie *requirements.IncompatibleError
			if !errors.As(err, &ie) {
				t.Errorf("Intersects() error is %T, want *IncompatibleError", err)
			}
			if tt.b.Intersects(tt.a) == nil {
				t.Errorf("(%s).Intersects(%s) = nil, want an error (Intersects is symmetric)", tt.b, tt.a)
			}
		})
	}
}

func TestIntersectsErrorFields(t *testing.T) {
	a := reqs(requirements.New("b", in, "1"), requirements.New("a", in, "1"))
	b := reqs(requirements.New("b", in, "2"), requirements.New("a", in, "2"))
	var ie *requirements.IncompatibleError
	if !errors.As(a.Intersects(b), &ie) {
		t.Fatalf("Intersects() error is not an *IncompatibleError")
	}
	type conflict struct{ Key, Existing, Incoming string }
	var got []conflict
	for _, c := range ie.Conflicts {
		got = append(got, conflict{c.Key, c.Existing.String(), c.Incoming.String()})
	}
	want := []conflict{{"a", "a In [1]", "a In [2]"}, {"b", "b In [1]", "b In [2]"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Conflicts mismatch (-want +got):\n%s", diff)
	}
	if len(ie.Undefined) != 0 {
		t.Errorf("Undefined = %q, want none from Intersects", ie.Undefined)
	}
}

func TestCompatibleSucceeds(t *testing.T) {
	tests := []struct {
		name     string
		nodePool requirements.Requirements
		pod      requirements.Requirements
	}{
		{name: "should schedule a pod without requirements", nodePool: reqs(requirements.New(v1.LabelArch, in, "amd64")), pod: reqs()},
		{name: "should schedule a pod selecting a custom label the NodePool defines", nodePool: reqs(requirements.New("team", in, "x")), pod: reqs(requirements.New("team", in, "x"))},
		{name: "should allow an undefined well-known label", nodePool: reqs(), pod: reqs(requirements.New(v1.LabelTopologyZone, in, "us-east-1a"))},
		{name: "should allow an undefined AWS well-known label", nodePool: reqs(), pod: reqs(requirements.New(cpu, gt, "4"))},
		{name: "should allow NotIn on an undefined custom label", nodePool: reqs(), pod: reqs(requirements.New("team", notIn, "x"))},
		{name: "should allow DoesNotExist on an undefined custom label", nodePool: reqs(), pod: reqs(requirements.New("team", dne))},
		{name: "should allow Exists on a custom label the NodePool defines", nodePool: reqs(requirements.New("team", in, "x", "y")), pod: reqs(requirements.New("team", exist))},
		{name: "should allow a custom label the NodePool defines with NotIn", nodePool: reqs(requirements.New("team", notIn, "y")), pod: reqs(requirements.New("team", in, "x"))},
		{name: "should allow NotIn against DoesNotExist on a custom label", nodePool: reqs(requirements.New("team", dne)), pod: reqs(requirements.New("team", notIn, "x"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.nodePool.Compatible(tt.pod); err != nil {
				t.Errorf("(%s).Compatible(%s) = %v, want nil", tt.nodePool, tt.pod, err)
			}
		})
	}
}

func TestCompatibleFails(t *testing.T) {
	tests := []struct {
		name     string
		nodePool requirements.Requirements
		pod      requirements.Requirements
		want     string
	}{
		{
			name:     "should not schedule a pod selecting a custom label no NodePool defines",
			nodePool: reqs(requirements.New(v1.LabelArch, in, "amd64")),
			pod:      reqs(requirements.New("team", in, "x")),
			want:     `label "team" does not have known values`,
		},
		{
			name:     "should not schedule a pod requiring Exists on an undefined custom label",
			nodePool: reqs(),
			pod:      reqs(requirements.New("team", exist)),
			want:     `label "team" does not have known values`,
		},
		{
			name:     "should hint at a defined custom label with a transposition typo",
			nodePool: reqs(requirements.New("team", in, "x")),
			pod:      reqs(requirements.New("tema", in, "x")),
			want:     `label "tema" does not have known values (typo of "team"?)`,
		},
		{
			name:     "should hint at a well-known label with a one-letter typo",
			nodePool: reqs(),
			pod:      reqs(requirements.New("karpenter.k8s.aws/instance-familly", in, "m5")),
			want:     `label "karpenter.k8s.aws/instance-familly" does not have known values (typo of "karpenter.k8s.aws/instance-family"?)`,
		},
		{
			name:     "should hint at the well-known label with the same name",
			nodePool: reqs(),
			pod:      reqs(requirements.New("zone", in, "us-east-1a")),
			want:     `label "zone" does not have known values (typo of "topology.kubernetes.io/zone"?)`,
		},
		{
			name:     "should hint at a defined label that contains the key",
			nodePool: reqs(requirements.New("example.com/team-name", in, "x")),
			pod:      reqs(requirements.New("team-name", in, "x")),
			want:     `label "team-name" does not have known values (typo of "example.com/team-name"?)`,
		},
		{
			name:     "should not schedule when a custom label's values do not overlap",
			nodePool: reqs(requirements.New("team", in, "x")),
			pod:      reqs(requirements.New("team", in, "y")),
			want:     `requirement "team In [x]" conflicts with "team In [y]"`,
		},
		{
			name:     "should not schedule when a well-known label's values do not overlap",
			nodePool: reqs(requirements.New(category, in, "c", "m", "r")),
			pod:      reqs(requirements.New(category, in, "p")),
			want:     `requirement "karpenter.k8s.aws/instance-category In [c m r]" conflicts with "karpenter.k8s.aws/instance-category In [p]"`,
		},
		{
			name:     "should list undefined labels before conflicts",
			nodePool: reqs(requirements.New(v1.LabelCapacityType, in, "spot")),
			pod:      reqs(requirements.New(v1.LabelCapacityType, in, "on-demand"), requirements.New("team", in, "x"), requirements.New("app", exist)),
			want:     `label "app" does not have known values; label "team" does not have known values; requirement "karpenter.sh/capacity-type In [spot]" conflicts with "karpenter.sh/capacity-type In [on-demand]"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.nodePool.Compatible(tt.pod)
			if err == nil {
				t.Fatalf("(%s).Compatible(%s) = nil, want %q", tt.nodePool, tt.pod, tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("(%s).Compatible(%s) error mismatch (-want +got):\n%s", tt.nodePool, tt.pod, diff)
			}
		})
	}
}

// instanceKeys are the keys catalog instance types define (zone and
// capacity type come from offerings).
var instanceKeys = func() map[string]bool {
	m := map[string]bool{}
	for k := range v1.WellKnownLabels {
		m[k] = true
	}
	for _, k := range []string{v1.LabelTopologyZone, v1.LabelZoneID, v1.LabelCapacityType, v1.LabelNodePool, v1.LabelEC2NodeClass} {
		delete(m, k)
	}
	return m
}()

var (
	m5xlarge = map[string]string{
		v1.LabelInstanceType: "m5.xlarge", v1.LabelArch: "amd64", v1.LabelOS: "linux",
		category: "m", v1.LabelInstanceFamily: "m5", cpu: "4", v1.LabelInstanceMemory: "16384",
	}
	g5xlarge = map[string]string{
		v1.LabelInstanceType: "g5.xlarge", v1.LabelArch: "amd64", v1.LabelOS: "linux",
		category: "g", v1.LabelInstanceFamily: "g5", cpu: "4", v1.LabelInstanceMemory: "16384",
		v1.LabelInstanceGPUCount: "1", v1.LabelInstanceGPUName: "a10g",
	}
	m52xlarge = map[string]string{
		v1.LabelInstanceType: "m5.2xlarge", v1.LabelArch: "amd64", v1.LabelOS: "linux",
		category: "m", v1.LabelInstanceFamily: "m5", cpu: "8", v1.LabelInstanceMemory: "32768",
	}
)

// TestInstanceTypeFiltering covers karpenter-spec §11.3 item 6 and the
// absent-key-is-DoesNotExist rule, through AdmitsLabels, MatchesLabels and
// the equivalent Intersects against FromInstanceLabels.
func TestInstanceTypeFiltering(t *testing.T) {
	types := map[string]map[string]string{"m5.xlarge": m5xlarge, "g5.xlarge": g5xlarge, "m5.2xlarge": m52xlarge}
	tests := []struct {
		name string
		reqs requirements.Requirements
		want []string
	}{
		{name: "instance-cpu Gt 4 excludes 4-vCPU types", reqs: reqs(requirements.New(cpu, gt, "4")), want: []string{"m5.2xlarge"}},
		{name: "instance-cpu Gte 4 includes 4-vCPU types", reqs: reqs(requirements.New(cpu, gte, "4")), want: []string{"g5.xlarge", "m5.2xlarge", "m5.xlarge"}},
		{name: "instance-cpu Lt 8 excludes 8-vCPU types", reqs: reqs(requirements.New(cpu, lt, "8")), want: []string{"g5.xlarge", "m5.xlarge"}},
		{name: "instance-gpu-count Exists excludes non-GPU types", reqs: reqs(requirements.New(v1.LabelInstanceGPUCount, exist)), want: []string{"g5.xlarge"}},
		{name: "instance-gpu-count Gt 0 excludes non-GPU types", reqs: reqs(requirements.New(v1.LabelInstanceGPUCount, gt, "0")), want: []string{"g5.xlarge"}},
		{name: "instance-gpu-count DoesNotExist keeps only non-GPU types", reqs: reqs(requirements.New(v1.LabelInstanceGPUCount, dne)), want: []string{"m5.2xlarge", "m5.xlarge"}},
		{name: "instance-gpu-name NotIn keeps types without a GPU", reqs: reqs(requirements.New(v1.LabelInstanceGPUName, notIn, "a10g")), want: []string{"m5.2xlarge", "m5.xlarge"}},
		{name: "instance-category In narrows by label value", reqs: reqs(requirements.New(category, in, "c", "m", "r")), want: []string{"m5.2xlarge", "m5.xlarge"}},
		{name: "a custom label the instance types lack leaves them all", reqs: reqs(requirements.New("team", in, "x")), want: []string{"g5.xlarge", "m5.2xlarge", "m5.xlarge"}},
		{name: "zone is left to offerings", reqs: reqs(requirements.New(v1.LabelTopologyZone, in, "us-east-1a")), want: []string{"g5.xlarge", "m5.2xlarge", "m5.xlarge"}},
		{name: "combined requirements all apply", reqs: reqs(requirements.New(cpu, gte, "4"), requirements.New(v1.LabelInstanceMemory, lt, "32768"), requirements.New(v1.LabelInstanceGPUCount, dne)), want: []string{"m5.xlarge"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var admitted, matched, intersected []string
			for _, name := range []string{"g5.xlarge", "m5.2xlarge", "m5.xlarge"} {
				labels := types[name]
				if tt.reqs.AdmitsLabels(labels, instanceKeys) {
					admitted = append(admitted, name)
				}
				if tt.reqs.MatchesLabels(labels, instanceKeys) == nil {
					matched = append(matched, name)
				}
				if tt.reqs.Intersects(requirements.FromInstanceLabels(labels, instanceKeys)) == nil {
					intersected = append(intersected, name)
				}
			}
			if diff := cmp.Diff(tt.want, admitted); diff != "" {
				t.Errorf("AdmitsLabels mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, matched); diff != "" {
				t.Errorf("MatchesLabels mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, intersected); diff != "" {
				t.Errorf("Intersects(FromInstanceLabels) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMatchesLabelsError(t *testing.T) {
	tests := []struct {
		name   string
		reqs   requirements.Requirements
		labels map[string]string
		want   string
	}{
		{
			name:   "a label value outside the requirement",
			reqs:   reqs(requirements.New(cpu, gt, "4")),
			labels: m5xlarge,
			want:   `requirement "karpenter.k8s.aws/instance-cpu Exists >=5" conflicts with "karpenter.k8s.aws/instance-cpu In [4]"`,
		},
		{
			name:   "an absent well-known label",
			reqs:   reqs(requirements.New(v1.LabelInstanceGPUCount, exist)),
			labels: m5xlarge,
			want:   `requirement "karpenter.k8s.aws/instance-gpu-count Exists" conflicts with "karpenter.k8s.aws/instance-gpu-count DoesNotExist"`,
		},
		{
			name:   "every conflicting key in order",
			reqs:   reqs(requirements.New(v1.LabelInstanceGPUCount, exist), requirements.New(category, in, "p"), requirements.New(v1.LabelArch, in, "amd64")),
			labels: m5xlarge,
			want:   `requirement "karpenter.k8s.aws/instance-category In [p]" conflicts with "karpenter.k8s.aws/instance-category In [m]"; requirement "karpenter.k8s.aws/instance-gpu-count Exists" conflicts with "karpenter.k8s.aws/instance-gpu-count DoesNotExist"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.reqs.MatchesLabels(tt.labels, instanceKeys)
			if err == nil {
				t.Fatalf("MatchesLabels() = nil, want %q", tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("MatchesLabels() error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeSelectorRequirementsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		give []v1.NodeSelectorRequirementWithMinValues
		want []v1.NodeSelectorRequirementWithMinValues
	}{
		{
			name: "sorts keys and values and keeps minValues",
			give: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelInstanceFamily, Operator: in, Values: []string{"m5", "c5", "r5"}, MinValues: intPtr(2)},
				{Key: v1.LabelCapacityType, Operator: in, Values: []string{"spot", "on-demand"}},
			},
			want: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelInstanceFamily, Operator: in, Values: []string{"c5", "m5", "r5"}, MinValues: intPtr(2)},
				{Key: v1.LabelCapacityType, Operator: in, Values: []string{"on-demand", "spot"}},
			},
		},
		{
			name: "emits Gt and Lt as Gte and Lte",
			give: []v1.NodeSelectorRequirementWithMinValues{
				{Key: cpu, Operator: gt, Values: []string{"2"}},
				{Key: cpu, Operator: lt, Values: []string{"17"}},
			},
			want: []v1.NodeSelectorRequirementWithMinValues{
				{Key: cpu, Operator: gte, Values: []string{"3"}},
				{Key: cpu, Operator: lte, Values: []string{"16"}},
			},
		},
		{
			name: "emits NotIn before the bounds of the same key",
			give: []v1.NodeSelectorRequirementWithMinValues{
				{Key: cpu, Operator: gte, Values: []string{"4"}, MinValues: intPtr(3)},
				{Key: cpu, Operator: notIn, Values: []string{"8", "2"}},
			},
			want: []v1.NodeSelectorRequirementWithMinValues{
				{Key: cpu, Operator: notIn, Values: []string{"8"}, MinValues: intPtr(3)},
				{Key: cpu, Operator: gte, Values: []string{"4"}},
			},
		},
		{
			name: "intersects entries sharing a key",
			give: []v1.NodeSelectorRequirementWithMinValues{
				{Key: category, Operator: in, Values: []string{"c", "m", "r"}},
				{Key: category, Operator: notIn, Values: []string{"r"}, MinValues: intPtr(1)},
			},
			want: []v1.NodeSelectorRequirementWithMinValues{
				{Key: category, Operator: in, Values: []string{"c", "m"}, MinValues: intPtr(1)},
			},
		},
		{
			name: "keeps NotIn, Exists and DoesNotExist",
			give: []v1.NodeSelectorRequirementWithMinValues{
				{Key: "c", Operator: dne},
				{Key: "b", Operator: exist},
				{Key: "a", Operator: notIn, Values: []string{"x"}},
			},
			want: []v1.NodeSelectorRequirementWithMinValues{
				{Key: "a", Operator: notIn, Values: []string{"x"}},
				{Key: "b", Operator: exist},
				{Key: "c", Operator: dne},
			},
		},
		{
			name: "normalizes deprecated keys",
			give: []v1.NodeSelectorRequirementWithMinValues{
				{Key: "failure-domain.beta.kubernetes.io/zone", Operator: in, Values: []string{"us-east-1a"}},
			},
			want: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelTopologyZone, Operator: in, Values: []string{"us-east-1a"}},
			},
		},
		{
			name: "renders an impossible key as DoesNotExist",
			give: []v1.NodeSelectorRequirementWithMinValues{
				{Key: cpu, Operator: gt, Values: []string{"8"}},
				{Key: cpu, Operator: lt, Values: []string{"4"}},
			},
			want: []v1.NodeSelectorRequirementWithMinValues{
				{Key: cpu, Operator: dne},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := requirements.FromNodeSelector(tt.give)
			got := r.NodeSelectorRequirements()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("NodeSelectorRequirements() mismatch (-want +got):\n%s", diff)
			}
			again := requirements.FromNodeSelector(got).NodeSelectorRequirements()
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("round trip changed the requirements (-first +second):\n%s", diff)
			}
		})
	}
}

func TestFromNodeSelectorCopiesMinValues(t *testing.T) {
	mv := 2
	r := requirements.FromNodeSelector([]v1.NodeSelectorRequirementWithMinValues{{Key: "k", Operator: in, Values: []string{"a", "b"}, MinValues: &mv}})
	mv = 5
	if got := *r["k"].MinValues; got != 2 {
		t.Errorf("MinValues = %d after changing the input, want 2", got)
	}
}

func TestFromLabels(t *testing.T) {
	r := requirements.FromLabels(map[string]string{"beta.kubernetes.io/os": "linux", "team": "x"})
	got := r.String()
	want := "kubernetes.io/os In [linux], team In [x]"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromLabels() mismatch (-want +got):\n%s", diff)
	}
}

func TestAddIntersects(t *testing.T) {
	r := reqs(requirements.New(category, in, "c", "m", "r"))
	r.Add(requirements.New(category, notIn, "r"), requirements.New(cpu, gt, "2"), requirements.New(cpu, lte, "8"))
	want := "karpenter.k8s.aws/instance-category In [c m], karpenter.k8s.aws/instance-cpu Exists >=3 <=8"
	if diff := cmp.Diff(want, r.String()); diff != "" {
		t.Errorf("Add() mismatch (-want +got):\n%s", diff)
	}
}

func TestGetKeysHasLabels(t *testing.T) {
	r := reqs(
		requirements.New("z", in, "1"),
		requirements.New("a", in, "1", "2"),
		requirements.New("m", notIn, "1"),
		requirements.New("d", dne),
		requirements.New(cpu, gte, "4").Intersection(requirements.New(cpu, lte, "4")),
	)
	type got struct {
		Keys      []string
		Labels    map[string]string
		HasA      bool
		HasB      bool
		GetB      string
		GetBHasQ  bool
		GetA      string
		GetBValue []string
	}
	want := got{
		Keys:   []string{"a", "d", "karpenter.k8s.aws/instance-cpu", "m", "z"},
		Labels: map[string]string{"z": "1"},
		HasA:   true, HasB: false,
		GetB: "b Exists", GetBHasQ: true,
		GetA:      "a In [1 2]",
		GetBValue: []string{},
	}
	g := got{
		Keys: r.Keys(), Labels: r.Labels(), HasA: r.Has("a"), HasB: r.Has("b"),
		GetB: r.Get("b").String(), GetBHasQ: r.Get("b").Has("q"), GetA: r.Get("a").String(),
		GetBValue: r.Get("b").Values(),
	}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("accessors mismatch (-want +got):\n%s", diff)
	}
}

func TestCloneIsDeep(t *testing.T) {
	r := reqs(withMin(requirements.New("k", in, "a", "b"), 1))
	c := r.Clone()
	*c["k"].MinValues = 2
	c.Add(requirements.New("k", in, "a"))
	c.Add(requirements.New("other", exist))
	if diff := cmp.Diff("k In [a b] minValues 1", r.String()); diff != "" {
		t.Errorf("original changed after modifying the clone (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("k In [a] minValues 2, other Exists", c.String()); diff != "" {
		t.Errorf("clone mismatch (-want +got):\n%s", diff)
	}
	if requirements.Requirements(nil).Clone() != nil {
		t.Errorf("Clone() of nil is not nil")
	}
}

// compatibilityOperands are the fifteen single-key requirement sets of
// Karpenter's compatibility matrix (karpenter: pkg/scheduling/requirements_test.go
// "Compatibility"), in the order of the rows and columns of the matrices below.
func compatibilityOperands(key string) []requirements.Requirements {
	one := func(op corev1.NodeSelectorOperator, values ...string) requirements.Requirements {
		return reqs(requirements.New(key, op, values...))
	}
	return []requirements.Requirements{
		reqs(),            // unconstrained
		one(exist),        // exists
		one(dne),          // doesNotExist
		one(in, "A"),      // inA
		one(in, "B"),      // inB
		one(in, "A", "B"), // inAB
		one(notIn, "A"),   // notInA
		one(in, "1"),      // in1
		one(in, "9"),      // in9
		one(in, "1", "9"), // in19
		one(notIn, "1", "2"),
		one(gt, "1"),
		one(gt, "9"),
		one(lt, "1"),
		one(lt, "9"),
	}
}

// TestCompatibilityMatrix ports Karpenter's matrix: row.Compatible(column)
// succeeds where the matrix has '+'. The outcomes are Karpenter's.
func TestCompatibilityMatrix(t *testing.T) {
	names := []string{"unconstrained", "exists", "doesNotExist", "inA", "inB", "inAB", "notInA", "in1", "in9", "in19", "notIn12", "greaterThan1", "greaterThan9", "lessThan1", "lessThan9"}
	shared := []string{
		// exists through lessThan9; the unconstrained row differs below.
		"++-++++++++++++",
		"+-+---+---+----",
		"++-+-+----+----",
		"++--+++---+----",
		"++-++++---+----",
		"+++-+++++++++++",
		"++----++-+----+",
		"++----+-++++---",
		"++----++++++--+",
		"+++++++-+++++++",
		"++----+-+++++-+",
		"++----+---+++--",
		"++----+---+--++",
		"++----++-+++-++",
	}
	tests := []struct {
		name          string
		key           string
		unconstrained string
		strict        bool
	}{
		{name: "should be compatible with well-known v1 labels undefined", key: v1.LabelTopologyZone, unconstrained: "+++++++++++++++"},
		{name: "should be strictly compatible", key: "example.com/team", unconstrained: "+-+---+---+----"},
		{name: "should be strictly compatible on well-known labels with StrictlyCompatible", key: v1.LabelTopologyZone, unconstrained: "+-+---+---+----", strict: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			operands := compatibilityOperands(tt.key)
			want := append([]string{tt.unconstrained}, shared...)
			var got []string
			for _, row := range operands {
				var b []byte
				for _, col := range operands {
					check := row.Compatible
					if tt.strict {
						check = row.StrictlyCompatible
					}
					if check(col) == nil {
						b = append(b, '+')
					} else {
						b = append(b, '-')
					}
				}
				got = append(got, string(b))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("compatibility matrix mismatch (-want +got), rows and columns %v:\n%s", names, diff)
			}
		})
	}
}

func TestRequirementsString(t *testing.T) {
	r := reqs(
		requirements.New("exists", exist),
		requirements.New("doesNotExist", dne),
		requirements.New("inA", in, "A"),
		requirements.New("inB", in, "B"),
		requirements.New("inAB", in, "A", "B"),
		requirements.New("notInA", notIn, "A"),
		requirements.New("in1", in, "1"),
		requirements.New("in9", in, "9"),
		requirements.New("in19", in, "1", "9"),
		requirements.New("notIn12", notIn, "1", "2"),
		requirements.New("greaterThan1", gt, "1"),
		requirements.New("greaterThan9", gt, "9"),
		requirements.New("lessThan1", lt, "1"),
		requirements.New("lessThan9", lt, "9"),
	)
	// karpenter: pkg/scheduling/requirements_test.go "should print Requirements in the same order".
	want := "doesNotExist DoesNotExist, exists Exists, greaterThan1 Exists >=2, greaterThan9 Exists >=10, in1 In [1], in19 In [1 9], in9 In [9], inA In [A], inAB In [A B], inB In [B], lessThan1 Exists <=0, lessThan9 Exists <=8, notIn12 NotIn [1 2], notInA NotIn [A]"
	if diff := cmp.Diff(want, r.String()); diff != "" {
		t.Errorf("String() mismatch (-want +got):\n%s", diff)
	}
}

// TestCompatibleLabelHints ports Karpenter's "Error Messages" cases
// (karpenter: pkg/scheduling/requirements_test.go).
func TestCompatibleLabelHints(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want string
	}{
		{name: "should detect well known label truncations: zone", key: "zone", want: `label "zone" does not have known values (typo of "topology.kubernetes.io/zone"?)`},
		{name: "should detect well known label truncations: region", key: "region", want: `label "region" does not have known values (typo of "topology.kubernetes.io/region"?)`},
		{name: "should detect well known label truncations: nodepool", key: "nodepool", want: `label "nodepool" does not have known values (typo of "karpenter.sh/nodepool"?)`},
		{name: "should detect well known label truncations: instance type", key: "instance-type", want: `label "instance-type" does not have known values (typo of "node.kubernetes.io/instance-type"?)`},
		{name: "should detect well known label truncations: arch", key: "arch", want: `label "arch" does not have known values (typo of "kubernetes.io/arch"?)`},
		{name: "should detect well known label truncations: capacity type", key: "capacity-type", want: `label "capacity-type" does not have known values (typo of "karpenter.sh/capacity-type"?)`},
		{name: "should detect well known label typos: zone without a dot", key: "topology.kubernetesio/zone", want: `label "topology.kubernetesio/zone" does not have known values (typo of "topology.kubernetes.io/zone"?)`},
		{name: "should detect well known label typos: zone in another domain", key: "node.io/zone", want: `label "node.io/zone" does not have known values (typo of "topology.kubernetes.io/zone"?)`},
		{name: "should detect well known label typos: truncated region", key: "topology.kubernetes.io/regio", want: `label "topology.kubernetes.io/regio" does not have known values (typo of "topology.kubernetes.io/region"?)`},
		{name: "should detect well known label typos: region in another domain", key: "node.kubernetes.io/region", want: `label "node.kubernetes.io/region" does not have known values (typo of "topology.kubernetes.io/region"?)`},
		{name: "should detect well known label typos: nodepool without .sh", key: "karpenter/nodepool", want: `label "karpenter/nodepool" does not have known values (typo of "karpenter.sh/nodepool"?)`},
		{name: "should detect AWS well known label typos", key: "karpenter.k8s.aws/instance-gpu-cuont", want: `label "karpenter.k8s.aws/instance-gpu-cuont" does not have known values (typo of "karpenter.k8s.aws/instance-gpu-count"?)`},
		{name: "should display an error message for unknown labels", key: "deployment", want: `label "deployment" does not have known values`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := reqs().Compatible(reqs(requirements.New(tt.key, exist)))
			if err == nil {
				t.Fatalf("Compatible() = nil, want %q", tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("Compatible() error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStrictlyCompatibleError(t *testing.T) {
	node := requirements.FromLabels(map[string]string{v1.LabelArch: "amd64", "team": "x"})
	pod := reqs(requirements.New(v1.LabelTopologyZone, in, "us-east-1a"), requirements.New(v1.LabelArch, in, "arm64"), requirements.New(cpu, dne))
	want := `label "topology.kubernetes.io/zone" does not have known values; requirement "kubernetes.io/arch In [amd64]" conflicts with "kubernetes.io/arch In [arm64]"`
	err := node.StrictlyCompatible(pod)
	if err == nil {
		t.Fatalf("StrictlyCompatible() = nil, want %q", want)
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("StrictlyCompatible() error mismatch (-want +got):\n%s", diff)
	}
}

func TestOverlapsAndNegative(t *testing.T) {
	tests := []struct {
		name     string
		a, b     *requirements.Requirement
		overlaps bool
		negative [2]bool
	}{
		{name: "NotIn and DoesNotExist do not overlap but are both negative", a: requirements.New("k", notIn, "a"), b: requirements.New("k", dne), overlaps: false, negative: [2]bool{true, true}},
		{name: "In and Exists overlap", a: requirements.New("k", in, "a"), b: requirements.New("k", exist), overlaps: true},
		{name: "bounds and NotIn overlap; bounded NotIn is not negative", a: requirements.New(cpu, gt, "1"), b: requirements.New(cpu, notIn, "2").Intersection(requirements.New(cpu, lt, "9")), overlaps: true},
		{name: "In outside bounds does not overlap", a: requirements.New(cpu, in, "1"), b: requirements.New(cpu, gt, "1"), overlaps: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Overlaps(tt.b); got != tt.overlaps {
				t.Errorf("(%s).Overlaps(%s) = %t, want %t", tt.a, tt.b, got, tt.overlaps)
			}
			if got := tt.b.Overlaps(tt.a); got != tt.overlaps {
				t.Errorf("(%s).Overlaps(%s) = %t, want %t", tt.b, tt.a, got, tt.overlaps)
			}
			if got := [2]bool{tt.a.Negative(), tt.b.Negative()}; got != tt.negative {
				t.Errorf("Negative() = %v, want %v", got, tt.negative)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	many := make([]string, 0, 12)
	for i := range 12 {
		many = append(many, fmt.Sprintf("t%02d", i))
	}
	tests := []struct {
		name string
		a, b requirements.Requirements
		same bool
	}{
		{name: "the same set built differently is equal", a: reqs(requirements.New("k", in, "b", "a", "c"), requirements.New("k", notIn, "c")), b: reqs(requirements.New("k", in, "a", "b")), same: true},
		{name: "Gt and Gte of the successor are equal", a: reqs(requirements.New(cpu, gt, "4")), b: reqs(requirements.New(cpu, gte, "5")), same: true},
		{name: "In and NotIn of the same values differ", a: reqs(requirements.New("k", in, "a")), b: reqs(requirements.New("k", notIn, "a")), same: false},
		{name: "minValues matters", a: reqs(withMin(requirements.New("k", in, "a", "b"), 2)), b: reqs(requirements.New("k", in, "a", "b")), same: false},
		{name: "keys matter", a: reqs(requirements.New("k", exist)), b: reqs(requirements.New("j", exist)), same: false},
		{name: "long value lists are not abbreviated", a: reqs(requirements.New("k", in, many...)), b: reqs(requirements.New("k", in, many[:11]...)), same: false},
		{name: "a value cannot pose as a bound", a: reqs(requirements.New(cpu, notIn, ">5")), b: reqs(requirements.New(cpu, gte, "5")), same: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Canonical() == tt.b.Canonical(); got != tt.same {
				t.Errorf("Canonical() equal = %t, want %t:\n%q\n%q", got, tt.same, tt.a.Canonical(), tt.b.Canonical())
			}
		})
	}
}
