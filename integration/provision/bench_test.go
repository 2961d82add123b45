package provision_test

import (
	"fmt"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// BenchmarkProvisioner measures the provisioning path as deployed, minus
// the network: one pod batch posted through the API (SigV4, intake,
// DynamoDB idempotency key, SQS FIFO) and handled by the provisioner Lambda
// (decode, DynamoDB reads, EC2NodeClass resolution through EC2 and SSM,
// solve, conditional NodeClaim writes, launch templates, one CreateFleet per
// NodeClaim, NodeClaim updates, batch result) until every CreateFleet has
// answered. The stand-ins (kumo, ec2sim) answer in-process with no added
// latency, so the figure is nodewright's own cost plus the SDKs' and the
// stand-ins' request handling. Each iteration starts from an empty system,
// whose set-up is not timed. The pods are 1-CPU, 2 GiB pods over the
// on-demand m5 family.
func BenchmarkProvisioner(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			pods := make([]v1.PodSummary, n)
			for i := range pods {
				pods[i] = pod(fmt.Sprintf("web-%04d", i), "1", "2Gi")
			}
			claims := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				e := newEnv(b)
				e.postConfig(b, onDemandM5)
				batch := v1.PodBatch{
					TypeMeta: metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindPodBatch},
					ID:       "b1", Cluster: cluster, CreatedAt: metav1.NewTime(e.clock.Now()), Pods: pods,
				}
				b.StartTimer()
				if status := e.api.do(b, http.MethodPost, v1.RoutePodBatches, batch.ID, batch, nil); status != http.StatusAccepted {
					b.Fatalf("POST pod batch: status %d", status)
				}
				for _, r := range e.drain(10) {
					if len(r.BatchItemFailures) > 0 {
						b.Fatalf("provisioner reported failures %v", r.BatchItemFailures)
					}
				}
				b.StopTimer()
				claims = len(e.claims(b))
				if fleets := len(e.sim.CallsTo("CreateFleet")); claims == 0 || fleets != claims {
					b.Fatalf("%d CreateFleet calls for %d NodeClaims", fleets, claims)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(claims), "nodeclaims")
		})
	}
}
