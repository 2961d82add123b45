package scheduling_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// TestSolveRejectsPodSpecsTheAPIServerRejects checks that pod fields the
// API server's validation rejects make the pod unschedulable with a reason
// naming the field, instead of being planned (or reported in a garbled
// form, e.g. "topology spread on  (maxSkew 0, ...)").
func TestSolveRejectsPodSpecsTheAPIServerRejects(t *testing.T) {
	spread := func(c corev1.TopologySpreadConstraint) st.PodOption {
		return func(p *corev1.Pod) {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
		}
	}
	const prefix = "invalid pod spec (the API server rejects it): "
	tests := []struct {
		name string
		opt  st.PodOption
		want string
	}{
		{
			name: "should not schedule a pod with a negative cpu request",
			opt: func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("-1")
			},
			want: prefix + `negative quantity for "cpu"`,
		},
		{
			name: "should not schedule a pod whose spread constraint has maxSkew 0",
			opt:  spread(corev1.TopologySpreadConstraint{MaxSkew: 0, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule}),
			want: prefix + "topologySpreadConstraints[0].maxSkew 0: must be at least 1",
		},
		{
			name: "should not schedule a pod whose spread constraint has no topologyKey",
			opt:  spread(corev1.TopologySpreadConstraint{MaxSkew: 1, WhenUnsatisfiable: corev1.DoNotSchedule}),
			want: prefix + "topologySpreadConstraints[0].topologyKey: required",
		},
		{
			name: "should not schedule a pod whose spread constraint has an unknown whenUnsatisfiable",
			opt:  spread(corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: v1.LabelTopologyZone, WhenUnsatisfiable: "Maybe"}),
			want: prefix + `topologySpreadConstraints[0].whenUnsatisfiable "Maybe": want DoNotSchedule or ScheduleAnyway`,
		},
		{
			name: "should not schedule a pod whose required anti-affinity term has no topologyKey",
			opt: func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					}},
				}}
			},
			want: prefix + "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: required",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := st.Pod("web", st.Requests("1", "1Gi"), st.Labels(map[string]string{"app": "web"}), tt.opt)
			in := input([]v1.NodePool{st.NodePool("default")}, []*corev1.Pod{pod})
			got := viewOf(in, solve(t, in))
			want := view{Unschedulable: map[string]string{"web": tt.want}}
			if diff := cmp.Diff(want, got, cmpEmpty); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
