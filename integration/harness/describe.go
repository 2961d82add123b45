package harness

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Describe summarises the cluster for a failing test's log: every Node
// (conditions and taints), every Pod (phase, node, unmet conditions) and
// the last 30 Events. Errors reading an object kind are reported inline.
func (c *Cluster) Describe(ctx context.Context) string {
	var b strings.Builder
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "nodes: %v\n", err)
	} else {
		for _, n := range nodes.Items {
			var conds, taints []string
			for _, cd := range n.Status.Conditions {
				conds = append(conds, fmt.Sprintf("%s=%s", cd.Type, cd.Status))
			}
			for _, t := range n.Spec.Taints {
				taints = append(taints, t.ToString())
			}
			fmt.Fprintf(&b, "node %s conditions=[%s] taints=[%s]\n", n.Name, strings.Join(conds, " "), strings.Join(taints, " "))
		}
	}
	pods, err := c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "pods: %v\n", err)
	} else {
		for _, p := range pods.Items {
			var unmet []string
			for _, cd := range p.Status.Conditions {
				if cd.Status != corev1.ConditionTrue {
					unmet = append(unmet, fmt.Sprintf("%s=%s(%s: %s)", cd.Type, cd.Status, cd.Reason, cd.Message))
				}
			}
			fmt.Fprintf(&b, "pod %s/%s phase=%s node=%q ip=%q %s\n", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.PodIP, strings.Join(unmet, " "))
		}
	}
	events, err := c.Kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "events: %v\n", err)
	} else {
		items := events.Items
		sort.SliceStable(items, func(i, j int) bool { return items[i].LastTimestamp.Before(&items[j].LastTimestamp) })
		if len(items) > 30 {
			items = items[len(items)-30:]
		}
		for _, e := range items {
			fmt.Fprintf(&b, "event %s %s/%s %s: %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	return b.String()
}
