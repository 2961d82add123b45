package stack_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/local/stack"
	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
)

// karpenterLeaseName is Karpenter's leader-election Lease
// (forwarder/internal/forward KarpenterLeaseName).
const karpenterLeaseName = "karpenter-leader-election"

// karpenterNode is a node "Karpenter launched": its instance, Node and
// NodeClaim.
type karpenterNode struct {
	claim, node, instance, providerID string
}

// launchAsKarpenter launches n instances the way Karpenter does, through
// the simulator's EC2 API: a karpenter.k8s.aws/<hash> launch template and
// instant fleets tagged as Karpenter tags them (cluster, NodePool,
// EC2NodeClass; no nodewright mark), AL2023 user data with the pool's
// labels. Once their Nodes join it does what Karpenter's registration does
// (finalizer karpenter.sh/termination, label karpenter.sh/registered, the
// unregistered taint lifted) and writes their karpenter.sh/v1 NodeClaims
// with finalizer, hash annotations and status, as Karpenter would.
func launchAsKarpenter(t *testing.T, s *stack.Stack, pool *v1.NodePool, class *v1.EC2NodeClass, n int) []karpenterNode {
	t.Helper()
	ctx := t.Context()
	client := ec2.New(ec2.Options{Region: s.Region, BaseEndpoint: aws.String(s.SimURL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDKARPENTER", "karpenter-secret", "")})
	var image string
	for _, img := range s.Sim.Images() {
		if img.Architecture == "x86_64" && strings.Contains(img.Name, "al2023") && strings.Contains(img.Name, "standard") {
			image = img.ID
		}
	}
	network := s.Sim.Network()
	var groups []string
	for _, g := range network.SecurityGroups {
		groups = append(groups, g.ID)
	}
	var subnet string
	for _, sn := range network.Subnets {
		if !sn.Public && strings.HasSuffix(sn.Zone, "a") {
			subnet = sn.ID
		}
	}
	if image == "" || subnet == "" {
		t.Fatalf("no AL2023 image or private subnet in the simulator (image %q, subnet %q)", image, subnet)
	}
	labels := map[string]string{
		v1.LabelNodePool: pool.Name, v1.LabelEC2NodeClass: class.Name, v1.LabelCapacityType: "on-demand",
		"environment": "production", "managed-by": "karpenter",
	}
	ud, err := amifamily.AL2023.UserData(amifamily.Options{
		ClusterName: s.ClusterName, ClusterEndpoint: s.Server, CABundle: "Y2EtYnVuZGxlCg==", ClusterCIDR: "10.100.0.0/16",
		MaxPods: 29, Labels: labels,
	})
	if err != nil {
		t.Fatal(err)
	}
	tags := func(rt ec2types.ResourceType) ec2types.TagSpecification {
		return ec2types.TagSpecification{ResourceType: rt, Tags: []ec2types.Tag{
			{Key: aws.String("kubernetes.io/cluster/" + s.ClusterName), Value: aws.String("owned")},
			{Key: aws.String("eks:eks-cluster-name"), Value: aws.String(s.ClusterName)},
			{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String(pool.Name)},
			{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String(class.Name)},
		}}
	}
	ltName := "karpenter.k8s.aws/1187293812783643981"
	if _, err := client.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(ltName),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId: aws.String(image), UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(ud))), SecurityGroupIds: groups,
		},
		TagSpecifications: []ec2types.TagSpecification{tags(ec2types.ResourceTypeLaunchTemplate)},
	}); err != nil {
		t.Fatalf("CreateLaunchTemplate as Karpenter: %v", err)
	}
	var out []karpenterNode
	for i := range n {
		res, err := client.CreateFleet(ctx, &ec2.CreateFleetInput{
			Type: ec2types.FleetTypeInstant,
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
				TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand,
			},
			LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
				LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(ltName), Version: aws.String("$Latest")},
				Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, SubnetId: aws.String(subnet)}},
			}},
			TagSpecifications: []ec2types.TagSpecification{tags(ec2types.ResourceTypeInstance), tags(ec2types.ResourceTypeVolume), tags(ec2types.ResourceTypeFleet)},
		})
		if err != nil || len(res.Instances) != 1 || len(res.Instances[0].InstanceIds) != 1 {
			t.Fatalf("CreateFleet as Karpenter: %+v, %v", res, err)
		}
		out = append(out, karpenterNode{claim: fmt.Sprintf("%s-k%dp2x", pool.Name, i), instance: res.Instances[0].InstanceIds[0]})
	}

	// Registration, as Karpenter's lifecycle controller does it.
	poolHash, err := disruption.NodePoolHash(pool)
	if err != nil {
		t.Fatal(err)
	}
	classHash, classVersion, err := disruption.EC2NodeClassHash(class, "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for i := range out {
		k := &out[i]
		for {
			for _, node := range nodeList(t, s) {
				if strings.HasSuffix(node.Spec.ProviderID, "/"+k.instance) {
					k.node, k.providerID = node.Name, node.Spec.ProviderID
				}
			}
			if k.node != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Node of Karpenter's instance %s did not join", k.instance)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// kwok updates the Node too: retry on a conflict, as a controller does.
		if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			node, err := s.Kube.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node.Finalizers = append(node.Finalizers, v1.TerminationFinalizer)
			node.Labels[v1.LabelRegistered] = "true"
			node.Labels[v1.LabelInitialized] = "true"
			var taints []corev1.Taint
			for _, tn := range node.Spec.Taints {
				if tn.Key != v1.TaintKeyUnregistered {
					taints = append(taints, tn)
				}
			}
			node.Spec.Taints = taints
			_, err = s.Kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatalf("register Karpenter's node %s: %v", k.node, err)
		}
		inst, _ := s.Sim.Instance(k.instance)
		created := metav1.NewTime(time.Now().Add(-24 * time.Hour))
		// Karpenter labels its NodeClaim with the instance type's well-known
		// labels (karpenter.k8s.aws/instance-category, -generation, ...), as
		// the Node carries them; without them the NodePool's requirements
		// read the NodeClaim as drifted (RequirementsDrifted).
		typeLabels := map[string]string{}
		if node, err := s.Kube.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{}); err == nil {
			for key, v := range node.Labels {
				if strings.HasPrefix(key, "karpenter.k8s.aws/") {
					typeLabels[key] = v
				}
			}
		}
		claim := v1.NodeClaim{
			TypeMeta: metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: v1.KindNodeClaim},
			ObjectMeta: metav1.ObjectMeta{
				Name: k.claim, Finalizers: []string{v1.TerminationFinalizer},
				Labels: map[string]string{
					v1.LabelNodePool: pool.Name, v1.LabelEC2NodeClass: class.Name, v1.LabelCapacityType: "on-demand",
					v1.LabelInstanceType: inst.InstanceType, v1.LabelTopologyZone: inst.Zone, v1.LabelArch: "amd64",
					"environment": "production", "managed-by": "karpenter",
				},
				Annotations: map[string]string{
					v1.AnnotationNodePoolHash: poolHash, v1.AnnotationNodePoolHashVersion: "v3",
					"karpenter.k8s.aws/ec2nodeclass-hash": classHash, "karpenter.k8s.aws/ec2nodeclass-hash-version": classVersion,
					v1.AnnotationInstanceTagged: "true", v1.AnnotationClusterNameTaggedCompatible: "true",
				},
			},
			Spec: v1.NodeClaimSpec{
				NodeClassRef: &v1.NodeClassReference{Group: v1.AWSGroup, Kind: v1.KindEC2NodeClass, Name: class.Name},
				Requirements: []v1.NodeSelectorRequirementWithMinValues{
					{Key: v1.LabelNodePool, Operator: corev1.NodeSelectorOpIn, Values: []string{pool.Name}},
					{Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{inst.InstanceType}},
				},
			},
		}
		for key, v := range typeLabels {
			if _, set := claim.Labels[key]; !set {
				claim.Labels[key] = v
			}
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&claim)
		if err != nil {
			t.Fatal(err)
		}
		u, err := s.Dynamic.Resource(stack.NodeClaimResource).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create Karpenter's NodeClaim %s: %v", k.claim, err)
		}
		when := metav1.NewTime(created.Add(time.Minute)).UTC().Format(time.RFC3339)
		status := map[string]any{
			"providerID": k.providerID, "imageID": inst.ImageID, "nodeName": k.node,
			"capacity":    map[string]any{"cpu": "2", "memory": "7910Mi", "pods": "29"},
			"allocatable": map[string]any{"cpu": "1930m", "memory": "7220Mi", "pods": "29"},
		}
		var conds []any
		for _, ct := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, "Ready"} {
			conds = append(conds, map[string]any{"type": ct, "status": "True", "reason": ct, "message": "", "lastTransitionTime": when})
		}
		status["conditions"] = conds
		u.Object["status"] = status
		if _, err := s.Dynamic.Resource(stack.NodeClaimResource).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("set the status of Karpenter's NodeClaim %s: %v", k.claim, err)
		}
		// Karpenter's registration makes the NodeClaim the Node's owner:
		// were that object deleted (or replaced under a new UID), the
		// garbage collector would delete the Node.
		if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			node, err := s.Kube.CoreV1().Nodes().Get(ctx, k.node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node.OwnerReferences = append(node.OwnerReferences, metav1.OwnerReference{
				APIVersion: "karpenter.sh/v1", Kind: v1.KindNodeClaim, Name: k.claim, UID: u.GetUID(), BlockOwnerDeletion: ptr.To(true),
			})
			_, err = s.Kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatalf("make Karpenter's NodeClaim %s own its node %s: %v", k.claim, k.node, err)
		}
	}
	return out
}

// renewLease keeps Karpenter's Lease held and renewed every second, as a
// running Karpenter does, until the returned release is called, which
// releases it as Karpenter does on shutdown (holder cleared).
func renewLease(t *testing.T, s *stack.Stack) (release func()) {
	t.Helper()
	leases := s.Kube.CoordinationV1().Leases("kube-system")
	l, err := leases.Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: karpenterLeaseName, Namespace: "kube-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("karpenter-7c9f8d6b4-x2k4q"), LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if next, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err == nil {
				l = next
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		l.Spec.HolderIdentity = ptr.To("")
		if _, err := leases.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("release Karpenter's lease: %v", err)
		}
	}
}

func decodeYAML[T any](t *testing.T, data []byte, decode func([]byte) (*T, []v1.FieldError, error)) *T {
	t.Helper()
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := decode(j)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrationFromKarpenter takes over a cluster whose three nodes
// Karpenter launched: nodewright never terminates what it did not launch,
// and adopts Karpenter's nodes. While Karpenter's Lease is renewed
// nodewright adopts nothing, launches nothing for a pending pod and writes
// a KarpenterActive Event on the NodePool. Once Karpenter stops, garbage
// collection adopts the three nodes from a fresh snapshot, ten minutes of
// it (on an advanced clock) terminate nothing, pods that fit them launch nothing, `kubectl get
// nodeclaims` lists each node once, and an AMI pin drift-replaces the three
// adopted nodes one at a time (budget 1) through drift-<nodeclaim>-<hash>
// executions.
func TestMigrationFromKarpenter(t *testing.T) {
	const bootDelay = 4 * time.Second
	var gcAhead atomic.Int64
	s := startStack(t, func(o *stack.Options) {
		o.Disruption, o.BootDelay, o.GCInterval = true, bootDelay, 24*time.Hour
		o.GCClock = func() time.Time { return time.Now().Add(time.Duration(gcAhead.Load())) }
	})
	ctx := t.Context()

	// Karpenter ran the cluster: stop the forwarder while it launches, so
	// that nodewright meets Karpenter's nodes as a fresh install does.
	s.KillForwarder()
	release := renewLease(t, s)
	classYAML, err := os.ReadFile("../../deploy/demo/guide-complete/ec2nodeclass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, classYAML); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, poolYAML("migrate", "1", "")); err != nil {
		t.Fatal(err)
	}
	pool := decodeYAML(t, poolYAML("migrate", "1", ""), v1.DecodeNodePool)
	class := decodeYAML(t, classYAML, v1.DecodeEC2NodeClass)
	nodes := launchAsKarpenter(t, s, pool, class, 3)
	written := map[string]string{} // Karpenter's NodeClaim -> its resourceVersion as Karpenter left it
	for _, k := range nodes {
		c, err := s.Dynamic.Resource(stack.NodeClaimResource).Get(ctx, k.claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		written[k.claim] = c.GetResourceVersion()
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, spreadOnePerNode(deployment("spread", 3, "500m", "512Mi")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 2*time.Minute, "the pods Running on Karpenter's nodes", func(ctx context.Context, st stack.Status) bool {
		return st.RunningPods == 3 && st.PendingPods == 0
	})
	if err := s.StartForwarder(); err != nil {
		t.Fatal(err)
	}

	// Karpenter still running: a pod that fits no node stays Karpenter's.
	big := deployment("big", 1, "3", "1Gi")
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, time.Minute, "a KarpenterActive Event on the NodePool", func(ctx context.Context, _ stack.Status) bool {
		evs, err := s.Kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=KarpenterActive"})
		return err == nil && len(evs.Items) > 0 && evs.Items[0].InvolvedObject.Kind == "NodePool" && evs.Items[0].InvolvedObject.Name == "migrate"
	})
	time.Sleep(5 * time.Second) // several batching windows of the pending pod
	for i := 1; i <= 2; i++ {
		gcAhead.Store(int64(i) * int64(time.Minute))
		out, err := s.RunGC(ctx)
		if err != nil {
			t.Fatalf("gc pass %d: %v", i, err)
		}
		if len(out.Adoption.Adopted) != 0 || len(out.Cleanups) != 0 {
			t.Fatalf("gc pass %d while Karpenter runs: adopted %v, cleanups %+v; want nothing", i, out.Adoption.Adopted, out.Cleanups)
		}
	}
	if calls := s.Sim.CallsTo("CreateFleet"); len(calls) != 3 {
		t.Errorf("CreateFleet called %d times while Karpenter runs, want only Karpenter's 3", len(calls))
	}
	for _, k := range nodes {
		// No write at all from the forwarder on Karpenter's NodeClaims
		// while Karpenter runs: neither an Adopted condition nor a field.
		c, err := s.Dynamic.Resource(stack.NodeClaimResource).Get(ctx, k.claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rv := c.GetResourceVersion(); rv != written[k.claim] {
			t.Errorf("Karpenter's NodeClaim %s written while Karpenter runs (resourceVersion %s -> %s): managed fields %+v, status %v",
				k.claim, written[k.claim], rv, c.GetManagedFields(), c.Object["status"])
		}
		for _, mf := range c.GetManagedFields() {
			if mf.Manager == "nodewright-forwarder" {
				t.Errorf("Karpenter's NodeClaim %s has fields managed by nodewright-forwarder while Karpenter runs: %+v", k.claim, mf)
			}
		}
	}
	if log := tail(s.LogPath("forwarder"), 400); !strings.Contains(log, "Karpenter's controller is active") {
		t.Errorf("the forwarder's log does not say that Karpenter's controller is active:\n%s", log)
	}
	if err := s.Kube.AppsV1().Deployments("default").Delete(ctx, "big", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Karpenter stops. Garbage collection on the real clock adopts the
	// nodes (adoption acts only on a snapshot at most
	// provisioning.MaxAdoptionSnapshotAge old), then ten minutes of it, one
	// pass a minute on the advanced clock, terminate nothing.
	release()
	adopted := map[string]bool{}
	gcAhead.Store(0)
	for deadline := time.Now().Add(3 * time.Minute); len(adopted) < len(nodes) && time.Now().Before(deadline); {
		out, err := s.RunGC(ctx)
		if err != nil {
			t.Fatalf("gc pass: %v", err)
		}
		if len(out.Cleanups) != 0 {
			t.Fatalf("gc pass cleaned up %+v; want nothing", out.Cleanups)
		}
		for _, name := range out.Adoption.Adopted {
			adopted[name] = true
		}
		if len(adopted) < len(nodes) {
			time.Sleep(6 * time.Second) // the forwarder rebuilds its snapshot at least every 30 s
		}
	}
	for i := 3; i <= 12; i++ {
		gcAhead.Store(int64(i) * int64(time.Minute))
		out, err := s.RunGC(ctx)
		if err != nil {
			t.Fatalf("gc pass %d: %v", i, err)
		}
		if len(out.Cleanups) != 0 || len(out.Adoption.Adopted) != 0 {
			t.Fatalf("gc pass %d cleaned up %+v and adopted %v; want nothing", i, out.Cleanups, out.Adoption.Adopted)
		}
	}
	for _, k := range nodes {
		if !adopted[k.claim] {
			t.Errorf("NodeClaim %s not adopted within 3 minutes of Karpenter's stop (adopted %v)", k.claim, adopted)
		}
		if in, ok := s.Sim.Instance(k.instance); !ok || in.State != "running" {
			t.Errorf("Karpenter's instance %s is %q, want running", k.instance, in.State)
		}
	}
	if calls := s.Sim.CallsTo("TerminateInstances"); len(calls) != 0 {
		t.Errorf("TerminateInstances called %d times, want none", len(calls))
	}

	// Pods that fit the adopted nodes launch nothing.
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("fits", 2, "100m", "128Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, time.Minute, "the fitting pods Running", func(ctx context.Context, st stack.Status) bool {
		return servingPods(t, s, "app=fits") == 2
	})
	time.Sleep(3 * time.Second)
	if calls := s.Sim.CallsTo("CreateFleet"); len(calls) != 3 {
		t.Errorf("CreateFleet called %d times after the adoption, want only Karpenter's 3", len(calls))
	}

	// kubectl get nodeclaims lists each node once, the mirror being
	// Karpenter's object taken over, and condition Adopted True.
	eventually(t, s, 30*time.Second, "one NodeClaim per node, taken over as mirrors, each Adopted=True", func(ctx context.Context, _ stack.Status) bool {
		list, err := s.Dynamic.Resource(stack.NodeClaimResource).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != len(nodes) {
			return false
		}
		for _, c := range list.Items {
			if c.GetLabels()["nodewright.dev/mirror"] != "true" || conditionStatus(c.Object, v1.ConditionTypeAdopted) != "True" {
				return false
			}
		}
		return true
	})

	// Drift: the adopted nodes are replaced one at a time.
	if !s.Wired().Drift {
		t.Skip("the drift of the adopted nodes needs the local Step Functions engine (make sfn-deps); everything before it was checked")
	}
	before := nodeList(t, s)
	img := addImage(t, s, "amazon-eks-node-al2023-x86_64-standard-1.34-v20261120")
	stopWatch := watchServing(t, s, "app=spread", 3)
	pinAMI(t, s, "production", img.ID)
	pinned := time.Now()
	maxDisrupting := 0
	deadline := time.Now().Add(5 * time.Minute)
	for {
		current := nodeList(t, s)
		maxDisrupting = max(maxDisrupting, disrupting(current))
		images := nodeImages(s, current)
		done := servingPods(t, s, "app=spread") == 3 && len(current) == len(nodes)
		for _, n := range current {
			if images[n.Name] != img.ID || n.DeletionTimestamp != nil {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the adopted nodes not replaced %s after the pin: images %v (new %s), executions %+v", time.Since(pinned), images, img.ID, s.Executions())
		}
		time.Sleep(200 * time.Millisecond)
	}
	longest, gaps := stopWatch()
	t.Logf("adopted nodes replaced %s after the pin; %d moves, the longest a pod was short of its node %s", time.Since(pinned).Round(time.Second), gaps, longest)
	if maxDisrupting != 1 {
		t.Errorf("at most %d nodes were tainted %s at once, want 1 (the budget)", maxDisrupting, v1.TaintKeyDisrupted)
	}
	if longest >= bootDelay {
		t.Errorf("a pod waited %s for a node, not less than the %s boot delay", longest, bootDelay)
	}
	oldProvider := map[string]bool{}
	for _, n := range before {
		oldProvider[n.Spec.ProviderID] = true
	}
	for _, n := range nodeList(t, s) {
		if oldProvider[n.Spec.ProviderID] {
			t.Errorf("adopted node %s (%s) still exists", n.Name, n.Spec.ProviderID)
		}
	}
	for _, k := range nodes {
		if e, ok := finishedExecution(t, s, "drift-"+k.claim+"-", 30*time.Second); !ok || e.Status != "SUCCEEDED" || !driftExecution.MatchString(e.Name) {
			t.Errorf("adopted node %s: no succeeded drift-%s-<hash> execution (got %+v; executions %+v)", k.node, k.claim, e, s.Executions())
		}
	}
	// Each adopted node's NodeClaim goes with its claim, its termination
	// finalizer released (the mirrors sync every 10 s).
	eventually(t, s, 30*time.Second, "Karpenter's NodeClaims gone with their replaced nodes", func(ctx context.Context, _ stack.Status) bool {
		for _, k := range nodes {
			if _, err := s.Dynamic.Resource(stack.NodeClaimResource).Get(ctx, k.claim, metav1.GetOptions{}); err == nil {
				return false
			}
		}
		return true
	})
}

// conditionStatus is the status of the condition of type ct in an
// object's status.conditions, or "" when it has none.
func conditionStatus(obj map[string]any, ct string) string {
	conds, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == ct {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
