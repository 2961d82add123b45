package main

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

func TestTrimSharesWhatAWorkloadsPodsHaveInCommon(t *testing.T) {
	trim := newTrim()
	trimmed := func(t *testing.T, p *corev1.Pod) *corev1.Pod {
		t.Helper()
		obj, err := trim(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		got := obj.(*corev1.Pod)
		if diff := cmp.Diff(v1.SummarizePod(p), v1.SummarizePod(got)); diff != "" {
			t.Errorf("summary of %s changed by trimming (-original +trimmed):\n%s", p.Name, diff)
		}
		return got
	}
	same := func(x, y any) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }

	a, b := workloadPod(1, 1), workloadPod(1, 2) // one ReplicaSet, two nodes
	other := workloadPod(2, 3)                   // another ReplicaSet, the same pod spec
	bigger := workloadPod(1, 4)
	bigger.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	ta, tb, to, tg := trimmed(t, a), trimmed(t, b), trimmed(t, other), trimmed(t, bigger)

	if ta.Spec.NodeName != a.Spec.NodeName || tb.Spec.NodeName != b.Spec.NodeName || ta.Spec.NodeName == tb.Spec.NodeName {
		t.Errorf("node names %q and %q, want %q and %q", ta.Spec.NodeName, tb.Spec.NodeName, a.Spec.NodeName, b.Spec.NodeName)
	}
	if !same(ta.Labels, tb.Labels) || !same(ta.OwnerReferences, tb.OwnerReferences) ||
		!same(ta.Spec.Containers, tb.Spec.Containers) || !same(ta.Spec.Tolerations, tb.Spec.Tolerations) {
		t.Error("two pods of one ReplicaSet do not share their labels, owners, containers and tolerations")
	}
	if same(ta.Labels, to.Labels) || !same(ta.Spec.Containers, to.Spec.Containers) {
		t.Error("pods of two ReplicaSets with one pod spec: want their containers shared and their labels not")
	}
	if !same(ta.Labels, tg.Labels) || same(ta.Spec.Containers, tg.Spec.Containers) {
		t.Error("a pod with other requests: want its labels shared and its containers not")
	}

	t.Run("a full table starts again and sharing resumes", func(t *testing.T) {
		for i := range maxSharedParts + 1 {
			p := workloadPod(1000+i, i)
			p.Spec.Containers[0].Name = fmt.Sprintf("c%d", i)
			trimmed(t, p)
		}
		x, y := trimmed(t, workloadPod(1, 5)), trimmed(t, workloadPod(1, 6))
		if !same(x.Labels, y.Labels) || !same(x.Spec.Containers, y.Spec.Containers) {
			t.Error("after the tables filled, two pods of one ReplicaSet do not share")
		}
	})
}
