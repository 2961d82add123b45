package provisioning_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/measure"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// BenchmarkProvision measures the provisioner's own overhead: one batch of
// pending pods in, NodeClaims written and launch requests out, against
// in-memory ports that answer at once (no DynamoDB, EC2 or SDK cost). It
// covers loading and resolving the configuration (catalog.Resolve of the
// whole embedded catalog), solving, naming, the create-only writes, the
// launches and recording their outcome.
func BenchmarkProvision(b *testing.B) {
	pool := nodePool(b, "default", `
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}`)
	class := nodeClass(b)
	for _, n := range []int{1, 100, 1000} {
		pods := benchPods(n)
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			var claims, launches int
			for b.Loop() {
				e := newEnv([]v1.NodePool{pool}, []v1.EC2NodeClass{class})
				res, err := e.provisioner(b).Provision(b.Context(), podBatch("bench", pods...), t0)
				if err != nil {
					b.Fatalf("Provision() error = %v", err)
				}
				claims, launches = len(res.Batch.NodeClaims), len(e.ec2.requests)
			}
			b.ReportMetric(float64(claims), "nodeclaims")
			b.ReportMetric(float64(launches), "launches")
		})
	}
}

// benchPods are n pending pods of eight deterministic shapes, 250m-2 cpu and
// 256Mi-4Gi memory.
func benchPods(n int) []v1.PodSummary {
	cpus := []string{"250m", "500m", "1", "2"}
	mems := []string{"256Mi", "1Gi", "2Gi", "4Gi"}
	pods := make([]v1.PodSummary, n)
	for i := range pods {
		p := podSummary(fmt.Sprintf("pod-%05d", i), cpus[i%len(cpus)])
		p.Spec.Containers[0].Requests[corev1.ResourceMemory] = resource.MustParse(mems[(i/len(cpus))%len(mems)])
		pods[i] = p
	}
	return pods
}

// BenchmarkProvisionAtScale is BenchmarkProvision for one full batch
// (v1.MaxPodsPerBatch, 4,000 pending pods) in a cluster of 5,000
// registered m5.xlarge nodes, each running three 1 cpu pods (room for
// small pods only), beside the provisioner Lambda's 2 GB and 2 minutes.
func BenchmarkProvisionAtScale(b *testing.B) {
	const nodes = 5000
	pool := nodePool(b, "default", `
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}`)
	class := nodeClass(b)
	var claims []v1.NodeClaim
	var state provisioning.ClusterState
	for i := range nodes {
		zone := []string{"us-east-1a", "us-east-1b", "us-east-1c"}[i%3]
		c := launchedClaim(fmt.Sprintf("default-%05d", i), fmt.Sprintf("aws:///%s/i-%017x", zone, i), "m5.xlarge", "3920m")
		node := corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i/250, i%250), Labels: map[string]string{
				v1.LabelNodePool: "default", v1.LabelInstanceType: "m5.xlarge", v1.LabelTopologyZone: zone,
				v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelRegistered: "true", v1.LabelInitialized: "true",
				v1.LabelArch: "amd64", v1.LabelOS: "linux",
			}},
			Spec: corev1.NodeSpec{ProviderID: c.Status.ProviderID},
			Status: corev1.NodeStatus{
				Allocatable: c.Status.Allocatable,
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		c.Status.NodeName = node.Name
		claims = append(claims, c)
		state.Nodes = append(state.Nodes, node)
		for j := range 3 {
			state.Pods = append(state.Pods, corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("busy-%05d-%d", i, j), Namespace: "default", UID: types.UID(fmt.Sprintf("uid-busy-%05d-%d", i, j))},
				Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")},
				}}}},
			})
		}
	}
	pods := benchPods(v1.MaxPodsPerBatch)
	b.Run(fmt.Sprintf("pods=%d/nodes=%d", len(pods), nodes), func(b *testing.B) {
		b.ReportAllocs()
		var placed, launches int
		stop := measure.LiveHeap()
		cpu := measure.CPU()
		for b.Loop() {
			e := newEnv([]v1.NodePool{pool}, []v1.EC2NodeClass{class})
			for _, c := range claims {
				e.store.claims[c.Name] = c
			}
			e.cluster.state = state
			res, err := e.provisioner(b).Provision(b.Context(), podBatch("bench", pods...), t0)
			if err != nil {
				b.Fatalf("Provision() error = %v", err)
			}
			placed, launches = len(res.Batch.Nominations), len(e.ec2.requests)
		}
		b.ReportMetric(cpu().Seconds()/float64(b.N), "cpu-s/op")
		b.ReportMetric(float64(stop()), "peak-live-B")
		b.ReportMetric(float64(placed), "nominated")
		b.ReportMetric(float64(launches), "launches")
	})
}
