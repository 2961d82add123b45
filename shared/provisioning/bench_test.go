package provisioning_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
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
