package ddbstore_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/measure"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// largeSnapshot is the snapshot of nodes nodes with podsPerNode bound pods
// each (labels, an owner, requests: the shape the forwarder summarizes),
// split as the forwarder splits it: the nodes in one part (at most
// v1.MaxNodesPerMessage), the pods in parts of 10,000 (well inside the
// intake's 4 MiB part).
func largeSnapshot(sid string, nodes, podsPerNode int) []*v1.ClusterSnapshot {
	var ns []v1.NodeSummary
	var pods []v1.PodSummary
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7910m"), corev1.ResourceMemory: resource.MustParse("29Gi"), corev1.ResourcePods: resource.MustParse("58")}
	for i := range nodes {
		name := fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", i/62500, i/250%250, i%250)
		ns = append(ns, v1.NodeSummary{
			Name: name, UID: types.UID("uid-" + name), ProviderID: fmt.Sprintf("aws:///us-east-1a/i-%017x", i),
			Labels: map[string]string{v1.LabelNodePool: "general", v1.LabelInstanceType: "m6a.2xlarge",
				v1.LabelTopologyZone: "us-east-1a", v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelHostname: name},
			Capacity: alloc, Allocatable: alloc, CreationTimestamp: metav1.NewTime(t0),
		})
		for j := range podsPerNode {
			pod := fmt.Sprintf("web-%05d-%02d", i, j)
			pods = append(pods, v1.PodSummary{
				Name: pod, Namespace: "default", UID: types.UID("uid-" + pod), NodeName: name,
				Labels:            map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5"},
				OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8c6b5", UID: "uid-rs-web"}},
				CreationTimestamp: metav1.NewTime(t0),
				Spec: v1.PodSpecSummary{Containers: []v1.ContainerSummary{{Name: "app", Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")}}}},
			})
		}
	}
	parts := []*v1.ClusterSnapshot{{Nodes: ns}}
	for len(pods) > 0 {
		n := min(len(pods), 10000)
		parts = append(parts, &v1.ClusterSnapshot{Pods: pods[:n]})
		pods = pods[n:]
	}
	for i, p := range parts {
		p.TypeMeta = metav1.TypeMeta{APIVersion: v1.APIVersion, Kind: v1.KindClusterSnapshot}
		p.ID, p.Cluster, p.CreatedAt = fmt.Sprintf("%s-%d", sid, i), testCluster, metav1.NewTime(t0)
		p.SnapshotID, p.Part, p.Parts = sid, i, len(parts)
	}
	return parts
}

// BenchmarkSnapshotAtScale measures what the intake stores and the
// disruption Lambda reads for a 5,000-node, 100,000-pod cluster: storing
// every part (each part is one intake invocation: 512 MB, 25 s) and
// reading the snapshot back merged (once per disruption evaluation: 2 GB,
// 50 s). DynamoDB is kumo in process, so the time includes the server's
// work and no network; the peak live heap includes the server's copy.
func BenchmarkSnapshotAtScale(b *testing.B) {
	const nodes, podsPerNode = 5000, 20
	e := newEnv(b)
	s := e.store(b, testCluster)
	ctx := context.Background()
	b.Run(fmt.Sprintf("put/nodes=%d/pods=%d", nodes, nodes*podsPerNode), func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		var parts int
		stop := measure.LiveHeap()
		cpu := measure.CPU()
		for b.Loop() {
			i++
			ps := largeSnapshot(fmt.Sprintf("s%d", i), nodes, podsPerNode)
			parts = len(ps)
			for _, p := range ps {
				if _, err := s.PutSnapshotPart(ctx, p, t0); err != nil {
					b.Fatalf("PutSnapshotPart() error = %v", err)
				}
			}
		}
		b.ReportMetric(cpu().Seconds()/float64(b.N), "cpu-s/op")
		b.ReportMetric(float64(stop()), "peak-live-B")
		b.ReportMetric(float64(parts), "parts")
	})
	b.Run(fmt.Sprintf("current/nodes=%d/pods=%d", nodes, nodes*podsPerNode), func(b *testing.B) {
		b.ReportAllocs()
		stop := measure.LiveHeap()
		cpu := measure.CPU()
		for b.Loop() {
			snap, err := s.CurrentSnapshot(ctx, t0)
			if err != nil {
				b.Fatalf("CurrentSnapshot() error = %v", err)
			}
			if len(snap.Nodes) != nodes || len(snap.Pods) != nodes*podsPerNode {
				b.Fatalf("CurrentSnapshot() has %d nodes and %d pods, want %d and %d", len(snap.Nodes), len(snap.Pods), nodes, nodes*podsPerNode)
			}
		}
		b.ReportMetric(cpu().Seconds()/float64(b.N), "cpu-s/op")
		b.ReportMetric(float64(stop()), "peak-live-B")
	})
}

// BenchmarkListNodeClaims measures listing 5,000 launched NodeClaims (the
// disruption and gc Lambdas list every claim each run).
func BenchmarkListNodeClaims(b *testing.B) {
	const claims = 5000
	e := newEnv(b)
	s := e.store(b, testCluster)
	ctx := context.Background()
	for i := range claims {
		c := nodeClaim(fmt.Sprintf("general-%05d", i), launchedAs(fmt.Sprintf("aws:///us-east-1a/i-%017x", i)))
		if _, err := s.PutNodeClaim(ctx, c); err != nil {
			b.Fatalf("PutNodeClaim() error = %v", err)
		}
	}
	b.Run(fmt.Sprintf("claims=%d", claims), func(b *testing.B) {
		b.ReportAllocs()
		stop := measure.LiveHeap()
		cpu := measure.CPU()
		for b.Loop() {
			got, err := s.ListNodeClaims(ctx)
			if err != nil {
				b.Fatalf("ListNodeClaims() error = %v", err)
			}
			if len(got) != claims {
				b.Fatalf("ListNodeClaims() = %d claims, want %d", len(got), claims)
			}
		}
		b.ReportMetric(cpu().Seconds()/float64(b.N), "cpu-s/op")
		b.ReportMetric(float64(stop()), "peak-live-B")
	})
}
