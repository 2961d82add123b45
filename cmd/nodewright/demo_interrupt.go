package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/deploy/demo"
	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// The demo's Spot workload (deploy/demo/spot/).
const (
	spotDeployment = "spot-inflate"
	spotReplicas   = 2
)

// offering names an EC2 offering: instance type, zone and capacity type.
type offering struct{ instanceType, zone, capacityType string }

func offeringOf(in ec2sim.Instance) offering {
	return offering{in.InstanceType, in.Zone, in.CapacityType}
}

func (o offering) String() string { return o.capacityType + " " + o.instanceType + " in " + o.zone }

// applySpot applies the interruption demo's Spot NodePool and Deployment
// (deploy/demo/spot).
func (d *demoRun) applySpot(ctx context.Context, s *stack.Stack) error {
	for _, f := range []string{"nodepool.yaml", "spot-inflate.yaml"} {
		data, err := demo.Spot.ReadFile("spot/" + f)
		if err != nil {
			return err
		}
		if err := s.Apply(ctx, data); err != nil {
			return fmt.Errorf("apply %s: %w", f, err)
		}
		d.say("interruption: applied deploy/demo/spot/%s", f)
	}
	return nil
}

// interruption is the demo's Spot interruption step (issue: survive Spot
// interruptions, karpenter-spec.md section 8): it applies the Spot NodePool
// and spot-inflate (deploy/demo/spot/), waits for its pods, issues a Spot
// interruption warning for one of their nodes through the EC2 simulator
// (the EventBridge event then goes through the interruption queue, the
// interruption Lambda and the interruption state machine, as on AWS), and
// follows the node until its pods run on a new node. It fails when the
// pods have not moved by the instance's reclaim time (two minutes after
// the warning), or when a launch after the warning reuses the interrupted
// offering (Karpenter marks it unavailable for three minutes).
func (d *demoRun) interruption(ctx context.Context, s *stack.Stack) error {
	if err := d.applySpot(ctx, s); err != nil {
		return err
	}
	d.say("interruption: waiting for %d %s pods on Spot capacity (NodePool spot)", spotReplicas, spotDeployment)
	var pods []corev1.Pod
	if err := d.poll(ctx, 3*time.Minute, "spot-inflate pods Running", func() (bool, error) {
		var err error
		pods, err = spotPods(ctx, s)
		return err == nil && countRunning(pods, "") == spotReplicas, err
	}); err != nil {
		return err
	}
	victim := pods[0].Spec.NodeName
	in, err := instanceOfNode(ctx, s, victim)
	if err != nil {
		return err
	}
	onVictim := podsOn(pods, victim)
	d.say("interruption: %d pods Running; node %s (%s, %s) runs %d of them", spotReplicas, victim, in.ID, offeringOf(in), onVictim)

	before := map[string]bool{}
	for _, i := range s.Sim.Instances() {
		before[i.ID] = true
	}
	warned := time.Now()
	iv, err := s.InterruptNode(ctx, in.ID)
	if err != nil {
		return err
	}
	d.say("interruption: EC2 Spot Instance Interruption Warning for %s (instance-action %s); EC2 reclaims it at %s, in %.0fs",
		in.ID, iv.Action, iv.ReclaimTime.Format(time.TimeOnly), time.Until(iv.ReclaimTime).Seconds())

	seenExec, doneExec, launched := map[string]bool{}, map[string]bool{}, map[string]bool{}
	tainted, moved, removed := false, false, false
	deadline := iv.ReclaimTime
	for {
		for _, e := range s.Executions() {
			if !strings.HasPrefix(e.Name, "interrupt-") {
				continue
			}
			if !seenExec[e.Name] {
				seenExec[e.Name] = true
				d.say("interruption: execution %s started %.1fs after the warning (no budget, no wait for the replacement: taint and drain at once)",
					e.Name, e.Started.Sub(warned).Seconds())
			}
			if !e.Finished.IsZero() && !doneExec[e.Name] {
				doneExec[e.Name] = true
				if e.Status != "SUCCEEDED" {
					return fmt.Errorf("execution %s %s: %s %s", e.Name, e.Status, e.Error, e.Cause)
				}
				d.say("interruption: execution %s SUCCEEDED after %.1fs", e.Name, e.Finished.Sub(e.Started).Seconds())
			}
		}
		for _, i := range s.Sim.Instances() {
			if before[i.ID] || launched[i.ID] || (i.State != "pending" && i.State != "running") {
				continue
			}
			launched[i.ID] = true
			if offeringOf(i) == offeringOf(in) {
				return fmt.Errorf("replacement %s launched on the interrupted offering (%s), which should be unavailable for 3 minutes", i.ID, offeringOf(i))
			}
			d.say("interruption: replacement launched: %s (%s); the interrupted offering (%s) is avoided for 3 minutes", i.ID, offeringOf(i), offeringOf(in))
		}
		if nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
			var node *corev1.Node
			for i := range nodes.Items {
				if nodes.Items[i].Name == victim && instanceID(nodes.Items[i].Spec.ProviderID) == in.ID {
					node = &nodes.Items[i]
				}
			}
			switch {
			case node != nil && !tainted && hasTaintKey(node.Spec.Taints, v1.TaintKeyDisrupted):
				tainted = true
				d.say("interruption: node %s tainted %s:NoSchedule %.1fs after the warning; its pods are evicted at once",
					victim, v1.TaintKeyDisrupted, time.Since(warned).Seconds())
			case node == nil && !removed:
				removed = true
				d.say("interruption: node %s removed %.1fs after the warning", victim, time.Since(warned).Seconds())
			}
		}
		if pods, err := spotPods(ctx, s); err == nil && !moved && countRunning(pods, victim) == spotReplicas {
			moved = true
			d.say("interruption: all %d %s pods Running off %s %.1fs after the warning, %.0fs before the reclaim",
				spotReplicas, spotDeployment, victim, time.Since(warned).Seconds(), time.Until(iv.ReclaimTime).Seconds())
		}
		if moved && removed && len(seenExec) > 0 && len(doneExec) == len(seenExec) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the reclaim time passed before the pods moved and the node was removed (moved %t, node removed %t, executions %d started, %d finished)",
				moved, removed, len(seenExec), len(doneExec))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// poll calls cond every 500 ms until it holds, failing after timeout with
// what and cond's last error.
func (d *demoRun) poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			//nolint:errorlint // cond's last error may be nil (%w would print %!w(<nil>)); the timeout is the failure
			return fmt.Errorf("%s: not after %s (last error: %v)", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// spotPods lists the spot-inflate pods.
func spotPods(ctx context.Context, s *stack.Stack) ([]corev1.Pod, error) {
	l, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + spotDeployment})
	if err != nil {
		return nil, fmt.Errorf("list %s pods: %w", spotDeployment, err)
	}
	return l.Items, nil
}

// countRunning counts the pods Running and not being deleted, on a node
// other than notOn when it is set.
// podsOn counts the pods bound to node.
func podsOn(pods []corev1.Pod, node string) int {
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName == node {
			n++
		}
	}
	return n
}

func countRunning(pods []corev1.Pod, notOn string) int {
	n := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Spec.NodeName != notOn {
			n++
		}
	}
	return n
}

// instanceOfNode returns the simulator's instance behind a Node.
func instanceOfNode(ctx context.Context, s *stack.Stack, name string) (ec2sim.Instance, error) {
	n, err := s.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ec2sim.Instance{}, fmt.Errorf("node %s: %w", name, err)
	}
	in, ok := s.Sim.Instance(instanceID(n.Spec.ProviderID))
	if !ok {
		return ec2sim.Instance{}, fmt.Errorf("node %s: no instance %s in the simulator", name, n.Spec.ProviderID)
	}
	return in, nil
}
