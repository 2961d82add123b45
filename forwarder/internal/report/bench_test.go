package report_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/forwarder/internal/report"
	"github.com/nodewright/nodewright/internal/measure"
)

// BenchmarkPodBatches measures building the batches of one window (summaries,
// encoding for the size bound, splitting) at 1, 100, 1,000, 4,000 (one
// full batch, v1.MaxPodsPerBatch) and 10,000 pods.
func BenchmarkPodBatches(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 4000, 10000} {
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			pods[i] = pod("load", fmt.Sprintf("p-%05d", i), "")
		}
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := report.PodBatches("prod", epoch, pods, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSnapshot measures building the cluster snapshot of 500 and of
// 5,000 nodes with 20 bound pods each (100,000 pods: the scale of
// shared/disruption's goals), reporting the peak live heap beside the
// forwarder pod's memory limit (deploy/).
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{500, 5000} {
		var nodes []*corev1.Node
		var pods []*corev1.Pod
		for i := range n {
			name := fmt.Sprintf("ip-10-%d-%d-%d", i/62500, i/250%250, i%250)
			nodes = append(nodes, node(name, "aws:///us-east-1a/i-"+name))
			for j := range 20 {
				pods = append(pods, pod("load", fmt.Sprintf("p-%d-%d", i, j), name))
			}
		}
		b.Run(fmt.Sprintf("nodes=%d/pods=%d", n, len(pods)), func(b *testing.B) {
			b.ReportAllocs()
			stop := measure.LiveHeap()
			cpu := measure.CPU()
			var parts int
			for b.Loop() {
				ps, _, _, err := report.Snapshot("prod", epoch, nodes, pods, nil, nil, nil, report.Storage{})
				if err != nil {
					b.Fatal(err)
				}
				parts = len(ps)
			}
			b.ReportMetric(cpu().Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(stop()), "peak-live-B")
			b.ReportMetric(float64(parts), "parts")
		})
	}
}
