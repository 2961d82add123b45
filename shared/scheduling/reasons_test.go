package scheduling_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// TestUnschedulableReasonsInUserTerms checks that reasons name what the
// user wrote (requirements, template labels, zones, instance types) rather
// than the solver's internal forms.
func TestUnschedulableReasonsInUserTerms(t *testing.T) {
	in, gt, lt := corev1.NodeSelectorOpIn, corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt
	tests := []struct {
		name string
		pool v1.NodePool
		pod  *corev1.Pod
		want string
	}{
		{
			name: "should quote a NodePool's Gt and Lt that allow no value together, not an internal DoesNotExist",
			pool: st.NodePool("default", st.PoolRequirement(v1.LabelInstanceCPU, gt, "3"), st.PoolRequirement(v1.LabelInstanceCPU, lt, "4")),
			pod:  st.Pod("web", st.Requests("1", "1Gi")),
			want: `NodePool "default": has no compatible instance type: requirements "karpenter.k8s.aws/instance-cpu Gt 3" and "karpenter.k8s.aws/instance-cpu Lt 4" allow no value together`,
		},
		{
			name: "should quote a pod's Gt and Lt that allow no value together, not an internal DoesNotExist",
			pool: st.NodePool("default"),
			pod:  st.Pod("web", st.Requests("1", "1Gi"), st.RequiredNodeAffinity(st.Term(st.Gt(v1.LabelInstanceCPU, 3), st.Lt(v1.LabelInstanceCPU, 4)))),
			want: `NodePool "default": the pod's requirements "karpenter.k8s.aws/instance-cpu Gt 3" and "karpenter.k8s.aws/instance-cpu Lt 4" allow no value together`,
		},
		{
			name: "should say a zone is not offered by the EC2NodeClass",
			pool: st.NodePool("default"),
			pod:  st.Pod("web", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{v1.LabelTopologyZone: "us-west-2a"})),
			want: `NodePool "default": zone us-west-2a is not offered by EC2NodeClass default (offerings in us-east-1a, us-east-1b, us-east-1c)`,
		},
		{
			name: "should say an instance type is not in the catalog",
			pool: st.NodePool("default"),
			pod:  st.Pod("web", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{v1.LabelInstanceType: "p3.2xlarge"})),
			want: `NodePool "default": instance type p3.2xlarge is not in the catalog of EC2NodeClass default`,
		},
		{
			name: "should describe a template label conflict as a template label, not a requirement",
			pool: st.NodePool("default", st.PoolLabels(map[string]string{"team": "web"})),
			pod:  st.Pod("web", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{"team": "db"})),
			want: `NodePool "default": template label team=web conflicts with pod's "team In [db]"`,
		},
		{
			name: "should still describe a written requirement conflict as a requirement",
			pool: st.NodePool("default", st.PoolRequirement("team", in, "web")),
			pod:  st.Pod("web", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{"team": "db"})),
			want: `NodePool "default": requirement "team In [web]" conflicts with pod's "team In [db]"`,
		},
		{
			name: "should hint at blockDeviceMappings when ephemeral-storage exceeds every type",
			pool: st.NodePool("default"),
			pod:  st.Pod("web", st.Requests("1", "1Gi"), st.Resources(corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("50Ti")})),
			want: `NodePool "default": largest compatible instance type m6g.large has 0 allocatable ephemeral-storage, pod requests 50Ti (an EC2NodeClass's blockDeviceMappings set the root volume size, which is a node's ephemeral storage)`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{tt.pool}, []*corev1.Pod{tt.pod})
			if got := reasonOf(t, solve(t, in)); got != tt.want {
				t.Errorf("reason = %s\nwant     %s", got, tt.want)
			}
		})
	}
}

// TestPreferredNodeAffinityOnRestrictedLabels checks that only required
// node-affinity terms are validated for restricted labels (Karpenter >=
// v1.5): a preferred term naming kubernetes.io/hostname is a preference
// like any other, honoured where it can be and relaxed away where not.
func TestPreferredNodeAffinityOnRestrictedLabels(t *testing.T) {
	tests := []struct {
		name  string
		nodes []scheduling.ExistingNode
		pod   *corev1.Pod
		want  view
	}{
		{
			name: "should launch for a pod whose preferred hostname term names no node, relaxing it",
			pod:  st.Pod("web", st.Requests("1", "1Gi"), st.PreferredNodeAffinity(10, st.Term(st.In(v1.LabelHostname, "ip-10-0-0-9")))),
			want: view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web"}}}},
		},
		{
			name:  "should honour a preferred hostname term that names an existing node with room",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("big", st.NodeAllocatable("8", "32Gi", "110"))), st.Existing(st.Node("ip-10-0-0-9", st.NodeAllocatable("8", "32Gi", "110")))},
			pod:   st.Pod("web", st.Requests("1", "1Gi"), st.PreferredNodeAffinity(10, st.Term(st.In(v1.LabelHostname, "ip-10-0-0-9")))),
			want:  view{Placements: map[string]string{"web": "ip-10-0-0-9"}},
		},
		{
			name: "should launch for a pod whose preferred term uses a restricted karpenter.sh label",
			pod:  st.Pod("web", st.Requests("1", "1Gi"), st.PreferredNodeAffinity(10, st.Term(st.In("karpenter.sh/initialized", "true")))),
			want: view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web"}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input([]v1.NodePool{st.NodePool("default")}, []*corev1.Pod{tt.pod}, st.WithNodes(tt.nodes...))
			if diff := cmp.Diff(tt.want, viewOf(in, solve(t, in)), cmpEmpty); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
