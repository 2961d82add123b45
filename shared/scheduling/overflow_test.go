package scheduling_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// TestSolveRequestsTooLargeToCount checks that requests which overflow
// int64 vector units are never read as zero (or negative): the pod is
// unschedulable with a reason naming the resource.
func TestSolveRequestsTooLargeToCount(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{
			name: "should not schedule a pod requesting cpu 1e19",
			pod:  st.Pod("big", st.Requests("1e19", "1Gi")),
			want: `requests "cpu" too large for any instance type or node (the total overflows a 64-bit count)`,
		},
		{
			name: "should not schedule a pod requesting cpu 9223372036854775807",
			pod:  st.Pod("big", st.Requests("9223372036854775807", "1Gi")),
			want: `requests "cpu" too large for any instance type or node (the total overflows a 64-bit count)`,
		},
		{
			name: "should not schedule a pod requesting memory 1e30",
			pod:  st.Pod("big", st.Requests("1", "1e30")),
			want: `requests "memory" too large for any instance type or node (the total overflows a 64-bit count)`,
		},
		{
			name: "should not schedule a pod whose containers' cpu adds up past int64",
			pod: st.Pod("big", st.Requests("5e15", "1Gi"), func(p *corev1.Pod) {
				c := p.Spec.Containers[0]
				c.Name = "second"
				p.Spec.Containers = append(p.Spec.Containers, c)
			}),
			want: `requests "cpu" too large for any instance type or node (the total overflows a 64-bit count)`,
		},
		{
			name: "should not schedule a pod whose limit stands in for an overflowing memory request",
			pod: st.Pod("big", st.Requests("1", ""), func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1e30")}
			}),
			want: `requests "memory" too large for any instance type or node (the total overflows a 64-bit count)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{st.NodePool("default")}, []*corev1.Pod{tt.pod})
			got := viewOf(in, solve(t, in))
			want := view{Unschedulable: map[string]string{"big": tt.want}}
			if diff := cmp.Diff(want, got, cmpEmpty); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
