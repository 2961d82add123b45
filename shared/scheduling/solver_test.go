package scheduling_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/scheduling"
	st "github.com/nodewright/nodewright/shared/scheduling/schedulingtest"
)

// Subtest names port Karpenter's spec titles (karpenter:
// pkg/controllers/provisioning/scheduling/*_test.go, suite_test.go) where
// one exists; the acceptance checklist items are karpenter-spec §11.3.

func TestSolveNodePoolSelection(t *testing.T) {
	pod := st.Pod("web-0", st.Requests("500m", "1Gi"))
	tests := []struct {
		name  string
		pools []v1.NodePool
		want  string // pool of the single claim
	}{
		{
			name:  "should schedule to the nodepool with the highest weight (11.3 item 4)",
			pools: []v1.NodePool{st.NodePool("a", st.PoolWeight(10)), st.NodePool("b", st.PoolWeight(50))},
			want:  "b",
		},
		{
			name:  "should schedule to the lexicographically greater nodepool name when weights are equal (11.3 item 4)",
			pools: []v1.NodePool{st.NodePool("a"), st.NodePool("b"), st.NodePool("ab")},
			want:  "b",
		},
		{
			name: "should schedule to a lower-weight nodepool when the heavier one's taints are not tolerated",
			pools: []v1.NodePool{st.NodePool("tainted", st.PoolWeight(100), st.PoolTaint("team", "x", corev1.TaintEffectNoSchedule)),
				st.NodePool("open", st.PoolWeight(1))},
			want: "open",
		},
		{
			name: "should skip a nodepool that is being deleted",
			pools: []v1.NodePool{st.NodePool("gone", st.PoolWeight(100), func(np *v1.NodePool) {
				now := metav1.NewTime(st.Epoch)
				np.DeletionTimestamp = &now
			}), st.NodePool("live")},
			want: "live",
		},
		{
			name: "should skip a static nodepool",
			pools: []v1.NodePool{st.NodePool("static", st.PoolWeight(100), func(np *v1.NodePool) {
				n := int64(3)
				np.Spec.Replicas = &n
			}), st.NodePool("dynamic")},
			want: "dynamic",
		},
		{
			name: "should skip a nodepool that is not ready",
			pools: []v1.NodePool{st.NodePool("broken", st.PoolWeight(100), func(np *v1.NodePool) {
				np.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NodeClassNotReady"}}
			}), st.NodePool("ready")},
			want: "ready",
		},
		{
			name:  "should skip a nodepool whose requirements exclude every instance type",
			pools: []v1.NodePool{st.NodePool("none", st.PoolWeight(100), st.PoolRequirement(v1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "z9")), st.NodePool("any")},
			want:  "any",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(tt.pools, []*corev1.Pod{pod})
			res := solve(t, in)
			if len(res.NewClaims) != 1 {
				t.Fatalf("got %d claims, want 1 (unschedulable %v)", len(res.NewClaims), res.Unschedulable)
			}
			if got := res.NewClaims[0].NodePool; got != tt.want {
				t.Errorf("claim pool = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSolveNeverTradesWeightForPrice checks that the heavier NodePool gets
// the pods it can take and a lighter one only the rest, even where moving
// everything to the lighter pool is cheaper (weight is the user's priority:
// reservations and Savings Plans are not in list prices).
func TestSolveNeverTradesWeightForPrice(t *testing.T) {
	// reserved takes one c6i.large (4Gi): one 3Gi pod per node, and its cpu
	// limit allows one node.
	reserved := func(weight int32) v1.NodePool {
		return st.NodePool("reserved", st.PoolWeight(weight), st.PoolRequirement(v1.LabelInstanceType, corev1.NodeSelectorOpIn, "c6i.large"), st.PoolLimits("cpu", "2"))
	}
	general := st.NodePool("general", st.PoolWeight(10))
	tests := []struct {
		name  string
		pools []v1.NodePool
		pods  []*corev1.Pod
		want  []claimView
	}{
		{
			name:  "should put the first pod on the heavier pool and only the one its limit stops on the lighter, though the lighter node has room for both",
			pools: []v1.NodePool{general, reserved(50)},
			pods:  pods("web", 2, st.Requests("500m", "3Gi")),
			want: []claimView{
				{Pool: "general", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web-1"}},
				{Pool: "reserved", Cheapest: "c6i.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web-0"}},
			},
		},
		{
			name:  "should still pack by price among pools of equal weight",
			pools: []v1.NodePool{general, reserved(10)},
			pods:  pods("web", 2, st.Requests("500m", "3Gi")),
			want:  []claimView{{Pool: "general", Cheapest: "m6g.large", Zone: "us-east-1a", Capacity: "on-demand", Pods: []string{"web-0", "web-1"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(tt.pools, tt.pods)
			if diff := cmp.Diff(tt.want, viewOf(in, solve(t, in)).Claims); diff != "" {
				t.Errorf("claims mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSolveRequirements(t *testing.T) {
	tests := []struct {
		name  string
		pools []v1.NodePool
		pod   *corev1.Pod
		want  string // cheapest candidate of the single claim
	}{
		{
			name:  "should launch the cheapest instance type that fits",
			pools: []v1.NodePool{st.NodePool("default")},
			pod:   st.Pod("p", st.Requests("1", "1Gi")),
			want:  "m6g.large",
		},
		{
			name:  "should schedule pods that select a well-known label the nodepool does not define",
			pools: []v1.NodePool{st.NodePool("default")},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{v1.LabelArch: "amd64"})),
			want:  "c6i.large",
		},
		{
			name:  "should schedule pods with a custom label the nodepool defines in its labels (11.3 item 5)",
			pools: []v1.NodePool{st.NodePool("default", st.PoolLabels(map[string]string{"team": "x"}))},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{"team": "x"})),
			want:  "m6g.large",
		},
		{
			name:  "should schedule pods with a custom label the nodepool defines in its requirements (11.3 item 5)",
			pools: []v1.NodePool{st.NodePool("default", st.PoolRequirement("team", corev1.NodeSelectorOpIn, "x", "y"))},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{"team": "y"})),
			want:  "m6g.large",
		},
		{
			name:  "should schedule pods with NotIn on an undefined custom label (11.3 item 5)",
			pools: []v1.NodePool{st.NodePool("default")},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.RequiredNodeAffinity(st.Term(st.NotIn("team", "x")))),
			want:  "m6g.large",
		},
		{
			name:  "should schedule pods with DoesNotExist on an undefined custom label (11.3 item 5)",
			pools: []v1.NodePool{st.NodePool("default")},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.RequiredNodeAffinity(st.Term(st.DoesNotExist("team")))),
			want:  "m6g.large",
		},
		{
			name:  "should exclude instance types with exactly the Gt value (11.3 item 6)",
			pools: []v1.NodePool{st.NodePool("default", st.PoolRequirement(v1.LabelInstanceCPU, corev1.NodeSelectorOpGt, "2"))},
			pod:   st.Pod("p", st.Requests("1", "1Gi")),
			want:  "c6i.xlarge",
		},
		{
			name:  "should include instance types with exactly the Gte value (11.3 item 6)",
			pools: []v1.NodePool{st.NodePool("default", st.PoolRequirement(v1.LabelInstanceCPU, v1.NodeSelectorOpGte, "2"))},
			pod:   st.Pod("p", st.Requests("1", "1Gi")),
			want:  "m6g.large",
		},
		{
			name:  "should exclude instance types without the label for Exists on a well-known label (11.3 item 6)",
			pools: []v1.NodePool{st.NodePool("default", st.PoolRequirement(v1.LabelInstanceGPUCount, corev1.NodeSelectorOpExists))},
			pod:   st.Pod("p", st.Requests("1", "1Gi")),
			want:  "g5.xlarge",
		},
		{
			name:  "should schedule to the second required node-affinity term when the first is unsatisfiable",
			pools: []v1.NodePool{st.NodePool("default")},
			pod: st.Pod("p", st.Requests("1", "1Gi"), st.RequiredNodeAffinity(
				st.Term(st.In(v1.LabelInstanceType, "x9.huge")), st.Term(st.In(v1.LabelInstanceFamily, "m6i")))),
			want: "m6i.large",
		},
		{
			name:  "should honor a satisfiable preferred node affinity",
			pools: []v1.NodePool{st.NodePool("default")},
			pod: st.Pod("p", st.Requests("1", "1Gi"),
				st.PreferredNodeAffinity(10, st.Term(st.In(v1.LabelInstanceFamily, "r6i")))),
			want: "r6i.large",
		},
		{
			name:  "should honor the heaviest preferred node-affinity term",
			pools: []v1.NodePool{st.NodePool("default")},
			pod: st.Pod("p", st.Requests("1", "1Gi"),
				st.PreferredNodeAffinity(1, st.Term(st.In(v1.LabelInstanceFamily, "r6i"))),
				st.PreferredNodeAffinity(50, st.Term(st.In(v1.LabelInstanceFamily, "m6i")))),
			want: "m6i.large",
		},
		{
			name:  "should relax an unsatisfiable preferred node affinity and schedule in the same round (11.3 item 9)",
			pools: []v1.NodePool{st.NodePool("default")},
			pod: st.Pod("p", st.Requests("1", "1Gi"),
				st.PreferredNodeAffinity(10, st.Term(st.In(v1.LabelTopologyZone, "us-east-1z")))),
			want: "m6g.large",
		},
		{
			name:  "should launch a GPU instance type for a pod requesting a GPU",
			pools: []v1.NodePool{st.NodePool("default")},
			pod: st.Pod("p", st.Requests("1", "1Gi"),
				st.Resources(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")})),
			want: "g5.xlarge",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(tt.pools, []*corev1.Pod{tt.pod})
			res := solve(t, in)
			if len(res.NewClaims) != 1 {
				t.Fatalf("got %d claims, want 1 (unschedulable %v)", len(res.NewClaims), res.Unschedulable)
			}
			if got := res.NewClaims[0].Expected.InstanceType; got != tt.want {
				t.Errorf("cheapest candidate = %q, want %q (candidates %v)", got, tt.want, res.NewClaims[0].InstanceTypes)
			}
		})
	}
}

func TestSolveUnschedulableReasons(t *testing.T) {
	tests := []struct {
		name  string
		pools []v1.NodePool
		nodes []scheduling.ExistingNode
		pod   *corev1.Pod
		want  []string // substrings of the reason
	}{
		{
			name:  "should not schedule pods with a custom label no nodepool defines (11.3 item 5)",
			pools: []v1.NodePool{st.NodePool("default")},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{"team": "x"})),
			want:  []string{`label "team" is defined by no NodePool`},
		},
		{
			name:  "should not schedule pods that do not tolerate the nodepool's taint",
			pools: []v1.NodePool{st.NodePool("batch", st.PoolTaint("workload", "batch", corev1.TaintEffectNoSchedule))},
			pod:   st.Pod("p", st.Requests("1", "1Gi")),
			want:  []string{`NodePool "batch": taint workload=batch:NoSchedule not tolerated`},
		},
		{
			name:  "should name the conflicting requirements",
			pools: []v1.NodePool{st.NodePool("general", st.PoolRequirement(v1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c", "m", "r"))},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{v1.LabelInstanceCategory: "p"})),
			want:  []string{`NodePool "general": requirement "karpenter.k8s.aws/instance-category In [c m r]" conflicts with pod's "karpenter.k8s.aws/instance-category In [p]"`},
		},
		{
			name:  "should name the largest compatible instance type when the pod is too big",
			pools: []v1.NodePool{st.NodePool("big", st.PoolRequirement(v1.LabelArch, corev1.NodeSelectorOpIn, "amd64"))},
			pod:   st.Pod("p", st.Requests("1", "100Gi")),
			want:  []string{`NodePool "big": largest compatible instance type m6i.4xlarge has 64Gi allocatable memory, pod requests 100Gi`},
		},
		{
			name:  "should report a cpu limit that is reached (11.3 item 10)",
			pools: []v1.NodePool{st.NodePool("default", st.PoolLimits("cpu", "8"))},
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.ManagedBy("default"), st.NodeAllocatable("8", "32Gi", "58"),
				st.NodeTaint("dedicated", "other", corev1.TaintEffectNoSchedule)))},
			pod:  st.Pod("p", st.Requests("1", "1Gi")),
			want: []string{`NodePool "default": limit cpu 8 reached (8 in use)`},
		},
		{
			name:  "should report a node-count limit that is reached",
			pools: []v1.NodePool{st.NodePool("default", st.PoolLimits("nodes", "1"))},
			nodes: []scheduling.ExistingNode{st.Existing(st.Node("n1", st.ManagedBy("default"), st.NodeAllocatable("2", "4Gi", "29")))},
			pod:   st.Pod("p", st.Requests("3", "1Gi")),
			want:  []string{`NodePool "default": limit nodes 1 reached (1 in use)`},
		},
		{
			name: "should combine the reasons of every nodepool in order",
			pools: []v1.NodePool{st.NodePool("a", st.PoolTaint("a", "", corev1.TaintEffectNoSchedule)),
				st.NodePool("b", st.PoolTaint("b", "", corev1.TaintEffectNoExecute))},
			pod:  st.Pod("p", st.Requests("1", "1Gi")),
			want: []string{`no NodePool can host the pod: NodePool "b": taint b:NoExecute not tolerated; NodePool "a": taint a:NoSchedule not tolerated`},
		},
		{
			name: "should explain a skipped nodepool",
			pools: []v1.NodePool{st.NodePool("static", func(np *v1.NodePool) {
				n := int64(1)
				np.Spec.Replicas = &n
			})},
			pod:  st.Pod("p", st.Requests("1", "1Gi")),
			want: []string{`NodePool "static": is static`},
		},
		{
			name:  "should not provision for pods owned by a DaemonSet (11.3 item 1)",
			pools: []v1.NodePool{st.NodePool("default")},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.OwnedBy("apps/v1", "DaemonSet", "agent")),
			want:  []string{`owned by DaemonSet "agent"`},
		},
		{
			name:  "should ignore pods that require karpenter.sh/nodepool DoesNotExist",
			pools: []v1.NodePool{st.NodePool("default")},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.RequiredNodeAffinity(st.Term(st.DoesNotExist(v1.LabelNodePool)))),
			want:  []string{"karpenter.sh/nodepool DoesNotExist"},
		},
		{
			name:  "should ignore pods with a restricted label in their node selector",
			pools: []v1.NodePool{st.NodePool("default")},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.NodeSelector(map[string]string{v1.LabelHostname: "n1"})),
			want:  []string{"ignored by the provisioner", "kubernetes.io/hostname is restricted"},
		},
		{
			name:  "should ignore pods with matchFields in a node selector term",
			pools: []v1.NodePool{st.NodePool("default")},
			pod: st.Pod("p", st.Requests("1", "1Gi"), st.RequiredNodeAffinity(corev1.NodeSelectorTerm{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}})),
			want: []string{"matchFields is not supported"},
		},
		{
			name:  "should report a resource no instance type provides",
			pools: []v1.NodePool{st.NodePool("default")},
			pod:   st.Pod("p", st.Requests("1", "1Gi"), st.Resources(corev1.ResourceList{"example.com/fpga": resource.MustParse("1")})),
			want:  []string{`requests "example.com/fpga", which no instance type or node provides`},
		},
		{
			name:  "should name the requirement that excludes every instance type",
			pools: []v1.NodePool{st.NodePool("eu", st.PoolRequirement(v1.LabelTopologyZone, corev1.NodeSelectorOpIn, "eu-west-1a"))},
			pod:   st.Pod("p", st.Requests("1", "1Gi")),
			want: []string{`NodePool "eu": has no compatible instance type: requirement "topology.kubernetes.io/zone In [eu-west-1a]" excludes every instance type`,
				"available offerings are in us-east-1a, us-east-1b, us-east-1c"},
		},
		{
			name:  "should report that no nodepool exists",
			pools: nil,
			pod:   st.Pod("p", st.Requests("1", "1Gi")),
			want:  []string{"no NodePool exists"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(tt.pools, []*corev1.Pod{tt.pod}, st.WithNodes(tt.nodes...))
			res := solve(t, in)
			why := reasonOf(t, res)
			t.Log(why)
			for _, w := range tt.want {
				if !strings.Contains(why, w) {
					t.Errorf("reason = %q\nwant it to contain %q", why, w)
				}
			}
			if len(res.NewClaims) != 0 {
				t.Errorf("got %d claims, want none", len(res.NewClaims))
			}
		})
	}
}

func TestSolveTolerations(t *testing.T) {
	tests := []struct {
		name string
		pool v1.NodePool
		pod  *corev1.Pod
	}{
		{
			name: "should schedule pods that tolerate the nodepool's taints",
			pool: st.NodePool("batch", st.PoolTaint("workload", "batch", corev1.TaintEffectNoSchedule)),
			pod:  st.Pod("p", st.Requests("1", "1Gi"), st.Toleration("workload", "batch", corev1.TaintEffectNoSchedule)),
		},
		{
			name: "should not require tolerating startup taints",
			pool: st.NodePool("default", st.PoolStartupTaint("node.cilium.io/agent-not-ready", "true", corev1.TaintEffectNoSchedule)),
			pod:  st.Pod("p", st.Requests("1", "1Gi")),
		},
		{
			name: "should tolerate a PreferNoSchedule taint after relaxing",
			pool: st.NodePool("soft", st.PoolTaint("spot", "true", corev1.TaintEffectPreferNoSchedule)),
			pod:  st.Pod("p", st.Requests("1", "1Gi")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := solve(t, input([]v1.NodePool{tt.pool}, []*corev1.Pod{tt.pod}))
			if len(res.NewClaims) != 1 || len(res.Unschedulable) != 0 {
				t.Fatalf("got %d claims and unschedulable %v, want 1 claim", len(res.NewClaims), res.Unschedulable)
			}
		})
	}
}

func TestSolveErrors(t *testing.T) {
	base := input([]v1.NodePool{st.NodePool("default")}, []*corev1.Pod{st.Pod("p", st.Requests("1", "1Gi"))})
	tests := []struct {
		name     string
		canceled bool
		modify   func(in *scheduling.Input)
		want     error
	}{
		{name: "should reject an unknown preference policy", modify: func(in *scheduling.Input) { in.Options.PreferencePolicy = "Sometimes" }, want: scheduling.ErrInvalidInput},
		{name: "should reject an unknown minValues policy", modify: func(in *scheduling.Input) { in.Options.MinValuesPolicy = "Loose" }, want: scheduling.ErrInvalidInput},
		{name: "should reject a negative instance-type cap", modify: func(in *scheduling.Input) { in.Options.MaxInstanceTypes = -1 }, want: scheduling.ErrInvalidInput},
		{name: "should reject a nil pod", modify: func(in *scheduling.Input) { in.Pods = append(in.Pods, nil) }, want: scheduling.ErrInvalidInput},
		{name: "should reject two pods with one UID", modify: func(in *scheduling.Input) { in.Pods = append(in.Pods, in.Pods[0].DeepCopy()) }, want: scheduling.ErrInvalidInput},
		{name: "should reject two nodepools with one name", modify: func(in *scheduling.Input) { in.NodePools = append(in.NodePools, in.NodePools[0]) }, want: scheduling.ErrInvalidInput},
		{name: "should reject a node listed twice", modify: func(in *scheduling.Input) {
			n := st.Existing(st.Node("n1", st.NodeAllocatable("1", "1Gi", "10")))
			in.Nodes = append(in.Nodes, n, n)
		}, want: scheduling.ErrInvalidInput},
		{name: "should stop when the context is canceled", canceled: true, modify: func(*scheduling.Input) {}, want: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			in.Pods = append([]*corev1.Pod(nil), base.Pods...)
			in.NodePools = append([]v1.NodePool(nil), base.NodePools...)
			tt.modify(&in)
			ctx := t.Context()
			if tt.canceled {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			_, err := scheduling.Solve(ctx, in)
			if !errors.Is(err, tt.want) {
				t.Errorf("Solve() error = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSolveIsDeterministic(t *testing.T) {
	ps := st.DiverseMix(300, 7)
	in := st.BenchmarkInput(ps, "")
	first, err := scheduling.Solve(t.Context(), in)
	if err != nil {
		t.Fatalf("Solve() error = %v", err)
	}
	for i := 0; i < 2; i++ {
		again, err := scheduling.Solve(t.Context(), st.BenchmarkInput(st.DiverseMix(300, 7), ""))
		if err != nil {
			t.Fatalf("Solve() error = %v", err)
		}
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("Solve() is not deterministic (-first +again):\n%s", diff)
		}
	}
}
