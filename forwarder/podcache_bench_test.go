package main

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// workloadPod is pod i of workload w (of a Deployment's ReplicaSet) as
// the API server returns it: defaulted tolerations, grace period, ready
// and scheduled conditions, one container with requests and limits.
func workloadPod(w, i int) *corev1.Pod {
	grace, prio := int64(30), int32(0)
	secs := int64(300)
	rs := fmt.Sprintf("app-%d-5d8f7c9b4", w)
	created := metav1.Unix(1_700_000_000+int64(i), 0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%05d", rs, i), Namespace: fmt.Sprintf("team-%d", w%10), UID: types.UID(fmt.Sprintf("0b8f5c2e-7d1a-4c3b-9e6f-%012d", i)),
			ResourceVersion: fmt.Sprint(100000 + i), CreationTimestamp: created,
			Labels:          map[string]string{"app": fmt.Sprintf("app-%d", w), "pod-template-hash": "5d8f7c9b4"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID(fmt.Sprintf("rs-%d", w))}},
		},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i%1000/250, i%250),
			Containers: []corev1.Container{{Name: "app", Image: "app:1",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
				}}},
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
			},
			TerminationGracePeriodSeconds: &grace, Priority: &prio,
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
		}},
	}
}

// BenchmarkPodCache measures what the pod informer's cache holds per pod
// after trim: 10,000 pods of 50 workloads, reported as bytes/pod of live
// heap (the objects the informer would keep).
func BenchmarkPodCache(b *testing.B) {
	const pods, workloads = 10_000, 50
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		kept, trim := make([]any, pods), newTrim()
		for i := range kept {
			obj, err := trim(workloadPod(i%workloads, i))
			if err != nil {
				b.Fatal(err)
			}
			kept[i] = obj
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/pods, "bytes/pod")
		runtime.KeepAlive(kept)
	}
}
