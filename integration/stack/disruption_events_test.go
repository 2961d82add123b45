package stack_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/nodewright/nodewright/local/stack"
)

// TestDisruptionEventsReachTheCluster drifts the only node of a pool (an
// AMI pin, budget 1) and checks that the disruption's event records become
// the Kubernetes Events Karpenter would have written, through the
// forwarder's relay: DisruptionTerminating on the drifted Node, Evicted on
// the pod it ran (in the pod's namespace, with the pod's UID, so `kubectl
// describe pod` would list it), and DisruptionLaunching on the replacement
// NodeClaim. It logs how long after the drifted node was tainted each
// Event appeared (the relay polls every 10 s).
func TestDisruptionEventsReachTheCluster(t *testing.T) {
	s := startStack(t, func(o *stack.Options) { o.Disruption = true })
	if !s.Wired().Drift {
		t.Skip("drift needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(ctx, poolYAML("drift", "1", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("moved", 1, "500m", "512Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "the pod Running on a Ready node", func(ctx context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0 && st.Nodes == 1 && st.ReadyNodes == 1
	})
	old := nodeList(t, s)[0]
	oldClaim := claimOfNode(t, s, []corev1.Node{old})[old.Name]
	pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=moved"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of app=moved: %v, %v; want one", pods, err)
	}
	oldPod := pods.Items[0]

	img := addImage(t, s, "amazon-eks-node-al2023-x86_64-standard-1.34-v20261121")
	pinAMI(t, s, "production", img.ID)
	pinned := time.Now()

	// The drifted node goes once its pod runs on the replacement.
	var tainted time.Time
	eventually(t, s, 5*time.Minute, "the drifted node replaced", func(ctx context.Context, st stack.Status) bool {
		nodes := nodeList(t, s)
		if tainted.IsZero() && disrupting(nodes) > 0 {
			tainted = time.Now()
		}
		for _, n := range nodes {
			if n.Spec.ProviderID == old.Spec.ProviderID {
				return false
			}
		}
		return st.RunningPods == 1 && st.PendingPods == 0
	})
	if tainted.IsZero() {
		tainted = pinned
	}

	type want struct {
		reason, kind, namespace, name string
		uid                           string // "" for any
	}
	wants := []want{
		{reason: "DisruptionTerminating", kind: "Node", namespace: "default", name: old.Name},
		{reason: "DisruptionTerminating", kind: "NodeClaim", namespace: "default", name: oldClaim},
		{reason: "Evicted", kind: "Pod", namespace: oldPod.Namespace, name: oldPod.Name, uid: string(oldPod.UID)},
		{reason: "DisruptionLaunching", kind: "NodeClaim", namespace: "default"},
	}
	seen := map[int]time.Duration{}
	var all []string
	deadline := time.Now().Add(time.Minute)
	for len(seen) < len(wants) {
		all = all[:0]
		for i, w := range wants {
			sel := fields.Set{"reason": w.reason, "involvedObject.kind": w.kind}
			if w.name != "" {
				sel["involvedObject.name"] = w.name
			}
			evs, err := s.Kube.CoreV1().Events(w.namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs.Items {
				all = append(all, fmt.Sprintf("%s %s %s/%s uid=%s: %s", e.Reason, e.InvolvedObject.Kind, e.Namespace, e.InvolvedObject.Name, e.InvolvedObject.UID, e.Message))
				if _, ok := seen[i]; ok || (w.uid != "" && string(e.InvolvedObject.UID) != w.uid) {
					continue
				}
				if e.ReportingController == "" || e.InvolvedObject.Kind == "Node" && e.InvolvedObject.UID != old.UID {
					continue
				}
				seen[i] = time.Since(tainted)
			}
		}
		if time.Now().After(deadline) {
			var missing []string
			for i, w := range wants {
				if _, ok := seen[i]; !ok {
					missing = append(missing, fmt.Sprintf("%s on %s %s/%s", w.reason, w.kind, w.namespace, w.name))
				}
			}
			slices.Sort(all)
			t.Fatalf("a minute after the drift completed, missing Events: %s; found:\n%s", strings.Join(missing, "; "), strings.Join(all, "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The Events are looked for once the drifted node is gone, so these
	// are upper bounds of their delay.
	for i, w := range wants {
		name := w.name
		if name == "" {
			name = "(the replacement)"
		}
		t.Logf("%s on %s %s: seen %s after the node was tainted (tainted %s after the pin)",
			w.reason, w.kind, name, seen[i].Round(time.Second), tainted.Sub(pinned).Round(time.Second))
	}
}
