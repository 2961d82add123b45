package scheduling

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func podTerm(key string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}
}

func nodeTerm(key, value string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}
}

// TestRelaxOrder checks Karpenter's relaxation order (karpenter:
// preferences.go Relax; karpenter-spec §2), one step per call.
func TestRelaxOrder(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Affinity: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					nodeTerm("zone", "a"), nodeTerm("zone", "b")}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 1, Preference: nodeTerm("arch", "arm64")}, {Weight: 50, Preference: nodeTerm("arch", "amd64")}},
			},
			PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 5, PodAffinityTerm: podTerm("zone")}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 1, PodAffinityTerm: podTerm("hostname")}, {Weight: 10, PodAffinityTerm: podTerm("zone")}}},
		},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule},
			{MaxSkew: 1, TopologyKey: "hostname", WhenUnsatisfiable: corev1.ScheduleAnyway},
		},
	}}
	var got []string
	p := pod
	for i := 0; i < 20; i++ {
		next, what, ok := relax(p, true)
		if !ok {
			break
		}
		got = append(got, what)
		p = next
	}
	want := []string{
		"dropped the first required node-affinity term",
		"dropped the heaviest preferred pod-affinity term",
		"dropped the heaviest preferred pod-anti-affinity term",
		"dropped the heaviest preferred pod-anti-affinity term",
		"dropped the heaviest preferred node-affinity term",
		"dropped the heaviest preferred node-affinity term",
		"dropped a ScheduleAnyway topology spread constraint",
		"tolerated PreferNoSchedule taints",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("relaxation steps mismatch (-want +got):\n%s", diff)
	}
	if terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) != 2 {
		t.Errorf("relax modified its input: %d required terms left, want 2", len(terms))
	}
	if n := len(p.Spec.TopologySpreadConstraints); n != 1 || p.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("after relaxing: %d spread constraints, want only the DoNotSchedule one", n)
	}
}

func TestRelaxDropsHeaviestFirst(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
			{Weight: 1, PodAffinityTerm: podTerm("hostname")}, {Weight: 10, PodAffinityTerm: podTerm("zone")}}}}}}
	next, _, ok := relax(pod, false)
	if !ok {
		t.Fatal("relax() = false, want a step")
	}
	left := next.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	if len(left) != 1 || left[0].PodAffinityTerm.TopologyKey != "hostname" {
		t.Errorf("after one step the preferred anti-affinity terms are %v, want only the weight-1 hostname term", left)
	}
}

func TestRelaxWithoutPreferNoScheduleStopsAfterPreferences(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{}}
	if _, _, ok := relax(pod, false); ok {
		t.Error("relax() of a pod without preferences = true, want false")
	}
	p, _, ok := relax(pod, true)
	if !ok {
		t.Fatal("relax() with a PreferNoSchedule pool = false, want the toleration step")
	}
	if _, _, ok := relax(p, true); ok {
		t.Error("relax() after tolerating PreferNoSchedule = true, want false")
	}
}

func TestIgnorePreferencesKeepsHardConstraints(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Affinity: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{nodeTerm("zone", "a")}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: nodeTerm("arch", "arm64")}},
			},
			PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  []corev1.PodAffinityTerm{podTerm("hostname")},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1, PodAffinityTerm: podTerm("zone")}},
			},
		},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
			{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule},
			{MaxSkew: 1, TopologyKey: "hostname", WhenUnsatisfiable: corev1.ScheduleAnyway},
		},
	}}
	got := ignorePreferences(pod)
	a := got.Spec.Affinity
	if len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 0 || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Error("ignorePreferences kept a preferred term")
	}
	if len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) != 1 || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Error("ignorePreferences dropped a required term")
	}
	if n := len(got.Spec.TopologySpreadConstraints); n != 1 {
		t.Errorf("ignorePreferences left %d spread constraints, want the DoNotSchedule one", n)
	}
}
