package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func node(name, pool, cpu, mem string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if pool != "" {
		n.Labels[v1.LabelNodePool] = pool
	}
	n.Status.Capacity = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110"),
	}
	return n
}

func claim(name, pool, nodeName, cpu string) v1.NodeClaim {
	c := v1.NodeClaim{}
	c.Name, c.Labels = name, map[string]string{v1.LabelNodePool: pool}
	c.Status.NodeName = nodeName
	c.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}
	return c
}

// summary renders a ResourceList as strings, for readable diffs.
func summary(l corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

func TestPoolResources(t *testing.T) {
	tests := []struct {
		name   string
		claims []v1.NodeClaim
		nodes  []*corev1.Node
		want   map[string]string
	}{
		{
			name: "an empty pool has zero base resources and no nodes",
			want: map[string]string{"cpu": "0", "memory": "0", "pods": "0", "ephemeral-storage": "0", "nodes": "0"},
		},
		{
			name:   "a registered claim counts its Node's capacity, not the claim's",
			claims: []v1.NodeClaim{claim("a", "default", "n1", "8")},
			nodes:  []*corev1.Node{node("n1", "default", "4", "16Gi")},
			want:   map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "0", "nodes": "1"},
		},
		{
			name:   "a claim not registered yet counts its own capacity",
			claims: []v1.NodeClaim{claim("a", "default", "", "2")},
			want:   map[string]string{"cpu": "2", "memory": "1Gi", "pods": "0", "ephemeral-storage": "0", "nodes": "1"},
		},
		{
			name:   "a Node of the pool that no claim names is counted too",
			claims: []v1.NodeClaim{claim("a", "default", "n1", "4")},
			nodes:  []*corev1.Node{node("n1", "default", "4", "16Gi"), node("n2", "default", "2", "8Gi")},
			want:   map[string]string{"cpu": "6", "memory": "24Gi", "pods": "220", "ephemeral-storage": "0", "nodes": "2"},
		},
		{
			name:   "claims and Nodes of other pools and unlabelled Nodes are left out",
			claims: []v1.NodeClaim{claim("a", "other", "n1", "4")},
			nodes:  []*corev1.Node{node("n1", "other", "4", "16Gi"), node("n3", "", "2", "8Gi")},
			want:   map[string]string{"cpu": "0", "memory": "0", "pods": "0", "ephemeral-storage": "0", "nodes": "0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := summary(PoolResources("default", tt.claims, tt.nodes))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PoolResources (-want +got):\n%s", diff)
			}
		})
	}
}

func pool(name, class string) v1.NodePool {
	np := v1.NodePool{}
	np.Name, np.Generation = name, 3
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: class}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{
		Key: v1.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"},
	}}
	return np
}

// brief is a condition without its time and generation.
type brief struct{ Type, Status, Reason, Message string }

func briefs(cs []metav1.Condition) []brief {
	out := make([]brief, len(cs))
	for i, c := range cs {
		out[i] = brief{c.Type, string(c.Status), c.Reason, c.Message}
	}
	return out
}

func TestPoolConditions(t *testing.T) {
	ready := &metav1.Condition{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeReady}
	invalid := pool("default", "default")
	invalid.Spec.Template.Spec.Requirements[0].Operator = "Near"
	tests := []struct {
		name  string
		pool  v1.NodePool
		class *ClassState
		want  []brief
	}{
		{
			name: "a valid pool whose class is Ready is Ready",
			pool: pool("default", "default"), class: &ClassState{Ready: ready},
			want: []brief{{"ValidationSucceeded", "True", "ValidationSucceeded", ""}, {"NodeClassReady", "True", "NodeClassReady", ""}, {"Ready", "True", "Ready", ""}},
		},
		{
			name: "a missing class is NodeClassNotFound",
			pool: pool("default", "default"),
			want: []brief{{"ValidationSucceeded", "True", "ValidationSucceeded", ""}, {"NodeClassReady", "False", "NodeClassNotFound", "NodeClass not found on cluster"}, {"Ready", "False", "UnhealthyDependents", "NodeClassReady=False"}},
		},
		{
			name: "a deleting class is NodeClassTerminating",
			pool: pool("default", "default"), class: &ClassState{Deleting: true, Ready: ready},
			want: []brief{{"ValidationSucceeded", "True", "ValidationSucceeded", ""}, {"NodeClassReady", "False", "NodeClassTerminating", "NodeClass is terminating"}, {"Ready", "False", "UnhealthyDependents", "NodeClassReady=False"}},
		},
		{
			name: "a class without Ready is NodeClassReadinessUnknown",
			pool: pool("default", "default"), class: &ClassState{},
			want: []brief{{"ValidationSucceeded", "True", "ValidationSucceeded", ""}, {"NodeClassReady", "False", "NodeClassReadinessUnknown", "NodeClass readiness is unknown"}, {"Ready", "False", "UnhealthyDependents", "NodeClassReady=False"}},
		},
		{
			name:  "a class that is not Ready passes on its reason and message",
			pool:  pool("default", "default"),
			class: &ClassState{Ready: &metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "UnhealthyDependents", Message: "SubnetsReady=False"}},
			want:  []brief{{"ValidationSucceeded", "True", "ValidationSucceeded", ""}, {"NodeClassReady", "False", "UnhealthyDependents", "SubnetsReady=False"}, {"Ready", "False", "UnhealthyDependents", "NodeClassReady=False"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PoolConditions(tt.pool, tt.class, nil, t0)
			if diff := cmp.Diff(tt.want, briefs(got)); diff != "" {
				t.Errorf("PoolConditions (-want +got):\n%s", diff)
			}
			for _, c := range got {
				if c.ObservedGeneration != 3 || !c.LastTransitionTime.Time.Equal(t0) {
					t.Errorf("%s: observedGeneration %d, lastTransitionTime %v; want 3, %v", c.Type, c.ObservedGeneration, c.LastTransitionTime, t0)
				}
			}
		})
	}
	t.Run("an invalid pool fails validation with the validation error", func(t *testing.T) {
		got := PoolConditions(invalid, &ClassState{Ready: ready}, nil, t0)
		v := Find(got, v1.ConditionTypeValidationSucceeded)
		if v.Status != metav1.ConditionFalse || v.Reason != ReasonNodePoolValidationFailed || v.Message == "" {
			t.Errorf("ValidationSucceeded = %+v; want False %s with a message", v, ReasonNodePoolValidationFailed)
		}
		if r := Find(got, v1.ConditionTypeReady); r.Status != metav1.ConditionFalse {
			t.Errorf("Ready = %s; want False", r.Status)
		}
	})
}

func TestPoolConditionsKeepTransitionTimeOfUnchangedConditions(t *testing.T) {
	ready := &metav1.Condition{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeReady}
	first := PoolConditions(pool("default", "default"), &ClassState{Ready: ready}, nil, t0)
	later := t0.Add(time.Hour)
	same := PoolConditions(pool("default", "default"), &ClassState{Ready: ready}, first, later)
	if diff := cmp.Diff(first, same); diff != "" {
		t.Errorf("unchanged conditions changed (-first +again):\n%s", diff)
	}
	changed := PoolConditions(pool("default", "default"), nil, first, later)
	if got := Find(changed, v1.ConditionTypeValidationSucceeded).LastTransitionTime.Time; !got.Equal(t0) {
		t.Errorf("ValidationSucceeded lastTransitionTime = %v; want %v (unchanged)", got, t0)
	}
	if got := Find(changed, v1.ConditionTypeNodeClassReady).LastTransitionTime.Time; !got.Equal(later) {
		t.Errorf("NodeClassReady lastTransitionTime = %v; want %v (changed)", got, later)
	}
}
