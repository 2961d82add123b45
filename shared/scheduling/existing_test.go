package scheduling_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

func TestSolveExistingCapacity(t *testing.T) {
	m6iLarge := testTypes()[1]
	tests := []struct {
		name  string
		nodes []scheduling.ExistingNode
		ds    []st.PodOption // one DaemonSet when set
		pods  []*corev1.Pod
		want  view
	}{
		{
			name:  "should schedule pods to existing nodes before launching",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("4", "8Gi", "20")))},
			pods:  pods("web", 2, st.Requests("1", "1Gi")),
			want:  view{Placements: map[string]string{"web-0": "n1", "web-1": "n1"}},
		},
		{
			name: "should not launch for a pod that fits an in-flight nodeclaim (11.3 item 3)",
			nodes: []scheduling.ExistingNode{st.InFlight(st.NodeClaim("default-abcde", st.ClaimType(m6iLarge, "us-east-1a", v1.CapacityTypeOnDemand)),
				st.Pod("old", st.Requests("1", "1Gi")))},
			pods: pods("web", 1, st.Requests("500m", "1Gi")),
			want: view{Placements: map[string]string{"web-0": "default-abcde"}},
		},
		{
			name: "should prefer initialized nodes, then names, first fit",
			nodes: []scheduling.ExistingNode{
				st.InFlight(st.NodeClaim("a-inflight", st.ClaimType(m6iLarge, "us-east-1a", v1.CapacityTypeOnDemand))),
				st.Existing(st.Node("c", st.NodeAllocatable("4", "8Gi", "20"))),
				st.Existing(st.Node("b", st.NodeAllocatable("4", "8Gi", "20"))),
			},
			pods: pods("web", 1, st.Requests("1", "1Gi")),
			want: view{Placements: map[string]string{"web-0": "b"}},
		},
		{
			name:  "should launch only for the pods that do not fit existing capacity",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("2", "8Gi", "20")))},
			pods: []*corev1.Pod{ // equal requests: creation time orders them (Karpenter's queue)
				st.Pod("web-0", st.Requests("1", "1Gi"), st.CreatedAt(st.Epoch)),
				st.Pod("web-1", st.Requests("1", "1Gi"), st.CreatedAt(st.Epoch.Add(time.Second))),
				st.Pod("web-2", st.Requests("1", "1Gi"), st.CreatedAt(st.Epoch.Add(2*time.Second))),
			},
			want: view{
				Placements: map[string]string{"web-0": "n1", "web-1": "n1"},
				Claims:     []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web-2"}}},
			},
		},
		{
			name: "should count bound pods against a node's allocatable",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("2", "8Gi", "20")),
				st.Pod("old", st.Requests("1500m", "1Gi")))},
			pods: pods("web", 1, st.Requests("1", "1Gi")),
			want: view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web-0"}}}},
		},
		{
			name:  "should count the pods resource of an existing node",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("8", "8Gi", "1")), st.Pod("old", st.Requests("100m", "")))},
			pods:  pods("web", 1, st.Requests("100m", "100Mi")),
			want:  view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web-0"}}}},
		},
		{
			name:  "should not schedule to a node marked for deletion",
			nodes: []scheduling.ExistingNode{{Node: st.Node("n1", st.NodeAllocatable("4", "8Gi", "20")), MarkedForDeletion: true}},
			pods:  pods("web", 1, st.Requests("1", "1Gi")),
			want:  view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web-0"}}}},
		},
		{
			name:  "should not schedule to an existing node whose taint the pod does not tolerate",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("4", "8Gi", "20"), st.NodeTaint("gpu", "true", corev1.TaintEffectNoSchedule)))},
			pods:  pods("web", 1, st.Requests("1", "1Gi")),
			want:  view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web-0"}}}},
		},
		{
			name: "should not schedule to a cordoned node (spec.unschedulable, kube-scheduler NodeUnschedulable)",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("4", "8Gi", "20"),
				func(n *corev1.Node) { n.Spec.Unschedulable = true }))},
			pods: pods("web", 1, st.Requests("1", "1Gi")),
			want: view{Claims: []claimView{{Pool: "default", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web-0"}}}},
		},
		{
			name: "should schedule to a cordoned node a pod that tolerates node.kubernetes.io/unschedulable",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("4", "8Gi", "20"),
				func(n *corev1.Node) { n.Spec.Unschedulable = true }))},
			pods: pods("web", 1, st.Requests("1", "1Gi"), st.Toleration(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule)),
			want: view{Placements: map[string]string{"web-0": "n1"}},
		},
		{
			name: "should ignore startup and ephemeral taints on uninitialized managed nodes",
			nodes: []scheduling.ExistingNode{st.Managed(
				st.Node("n1", st.NodeAllocatable("4", "8Gi", "20"), st.NodeLabels(map[string]string{v1.LabelNodePool: "default"}),
					st.NodeTaint("node.cilium.io/agent-not-ready", "true", corev1.TaintEffectNoSchedule),
					st.NodeTaint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)),
				st.NodeClaim("default-x", func(nc *v1.NodeClaim) {
					nc.Spec.StartupTaints = []corev1.Taint{{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
				}))},
			pods: pods("web", 1, st.Requests("1", "1Gi")),
			want: view{Placements: map[string]string{"web-0": "n1"}},
		},
		{
			name: "should require node labels for the pod's node selector on existing nodes",
			nodes: []scheduling.ExistingNode{
				st.Existing(st.Node("n1", st.NodeAllocatable("4", "8Gi", "20"))),
				st.Existing(st.Node("n2", st.NodeAllocatable("4", "8Gi", "20"), st.NodeLabels(map[string]string{v1.LabelArch: "arm64"}))),
			},
			pods: pods("web", 1, st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{v1.LabelArch: "arm64"})),
			want: view{Placements: map[string]string{"web-0": "n2"}},
		},
		{
			name:  "should reserve the remaining daemonset overhead on existing nodes",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("2", "8Gi", "20")))},
			ds:    []st.PodOption{st.Requests("1500m", "100Mi")},
			pods:  pods("web", 1, st.Requests("1", "1Gi")),
			want:  view{Claims: []claimView{{Pool: "default", Cheapest: "c6i.xlarge", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web-0"}}}},
		},
		{
			name: "should not reserve daemonset overhead twice when the daemon pod is bound",
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.NodeAllocatable("2", "8Gi", "20")),
				st.Pod("agent-n1", st.Requests("500m", "100Mi"), st.OwnedBy("apps/v1", "DaemonSet", "agent")))},
			ds:   []st.PodOption{st.Requests("500m", "100Mi")},
			pods: pods("web", 1, st.Requests("1", "1Gi")),
			want: view{Placements: map[string]string{"web-0": "n1"}},
		},
	}
	var many []scheduling.ExistingNode
	for i := 0; i < 40; i++ {
		cpu := "500m"
		if i == 27 || i == 31 {
			cpu = "4"
		}
		many = append(many, st.Existing(st.Node(fmt.Sprintf("n%02d", i), st.NodeAllocatable(cpu, "8Gi", "20"))))
	}
	tests = append(tests, struct {
		name  string
		nodes []scheduling.ExistingNode
		ds    []st.PodOption
		pods  []*corev1.Pod
		want  view
	}{
		name:  "should take the first node in order that has room among many full ones",
		nodes: many,
		pods:  pods("web", 1, st.Requests("1", "1Gi")),
		want:  view{Placements: map[string]string{"web-0": "n27"}},
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []st.InputOption{st.WithNodes(tt.nodes...)}
			if tt.ds != nil {
				opts = append(opts, st.WithDaemonSets(st.DaemonSet("agent", tt.ds...)))
			}
			in := input([]v1.NodePool{st.NodePool("default")}, tt.pods, opts...)
			got := viewOf(in, solve(t, in))
			if diff := cmp.Diff(tt.want, got, cmpEmpty); diff != "" {
				t.Errorf("plan mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
