package stack_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/stack"
)

func TestScaleUpFromZero(t *testing.T) {
	s := startStack(t)
	applyGuide(t, s)
	if _, err := s.Kube.AppsV1().Deployments("default").Create(t.Context(), deployment("inflate", 10, "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := eventually(t, s, 2*time.Minute, "10 pods running on launched nodes", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 10 && st.PendingPods == 0
	})
	if st.Nodes == 0 || st.Instances != st.Nodes {
		t.Errorf("status = %+v, want one Node per launched instance, at least one", st)
	}
	if st.PricePerHour <= 0 {
		t.Errorf("PricePerHour = %v, want > 0", st.PricePerHour)
	}
	t.Logf("scale-up from 0: %+v", st)
}
