package report_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/forwarder/internal/report"
)

// BenchmarkPodBatches measures building the batches of one window (summaries,
// encoding for the size bound, splitting) at 1, 100, 1,000 and 10,000 pods.
func BenchmarkPodBatches(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 10000} {
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			pods[i] = pod("load", fmt.Sprintf("p-%05d", i), "")
		}
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := report.PodBatches("prod", epoch, pods); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSnapshot measures building the cluster snapshot of 500 nodes
// with 20 bound pods each.
func BenchmarkSnapshot(b *testing.B) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for i := range 500 {
		name := fmt.Sprintf("ip-10-0-%d-%d", i/250, i%250)
		nodes = append(nodes, node(name, "aws:///us-east-1a/i-"+name))
		for j := range 20 {
			pods = append(pods, pod("load", fmt.Sprintf("p-%d-%d", i, j), name))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := report.Snapshot("prod", epoch, nodes, pods, nil, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}
