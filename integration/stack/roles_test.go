package stack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// roleClassYAML is an EC2NodeClass of the guide's selectors naming role.
func roleClassYAML(name, role string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: %s
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: %s
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
        network-type: private
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: my-cluster
`, name, role))
}

// rolePoolYAML is an on-demand NodePool over class.
func rolePoolYAML(name, class string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %s
spec:
  template:
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ['on-demand']
        - key: kubernetes.io/arch
          operator: In
          values: ['amd64']
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: %s
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
`, name, class))
}

// TestNodeClassRoleGetsItsOwnInstanceProfile checks Karpenter's
// instance-profile lifecycle for spec.role (karpenter-spec §7): a class
// naming the deployment's second allowed role gets an instance profile
// nodewright creates under its path, holding that role; its nodes launch
// with it; the class reports it (status.instanceProfile,
// InstanceProfileReady=True); a class naming a role the deployment does
// not allow is InstanceProfileReady=False naming spec.role and launches
// nothing; deleting the class after its nodes deletes its profile.
func TestNodeClassRoleGetsItsOwnInstanceProfile(t *testing.T) {
	s := startStack(t, func(o *stack.Options) { o.Disruption = true; o.GCInterval = 3 * time.Second })
	if !s.Wired().Drift {
		t.Skip("removing the NodePool's nodes needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	second := "KarpenterNodeRole-" + s.ClusterName + stack.SecondNodeRoleSuffix
	if _, err := s.IAM.CreateRole("Forbidden", "/"); err != nil {
		t.Fatal(err)
	}
	for _, m := range [][]byte{roleClassYAML("second", second), rolePoolYAML("second", "second"), roleClassYAML("forbidden", "Forbidden")} {
		if err := s.Apply(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, deployment("roles", 1, "500m", "512Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 90*time.Second, "the pod running on a launched node", func(_ context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0 && st.ReadyNodes == 1
	})

	getClass := func(name string) *v1.EC2NodeClass {
		u, err := s.Dynamic.Resource(ec2NodeClassResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var nc v1.EC2NodeClass
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nc); err != nil {
			t.Fatal(err)
		}
		return &nc
	}
	class := *getClass("second")
	profile := class.Status.InstanceProfile
	if !strings.HasPrefix(profile, s.ClusterName+"_") {
		t.Fatalf("status.instanceProfile = %q, want a %s_<hash> profile nodewright made", profile, s.ClusterName)
	}
	if c := meta.FindStatusCondition(class.Status.Conditions, v1.ConditionTypeInstanceProfileReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("InstanceProfileReady = %+v, want True", c)
	}
	p, ok := s.IAM.InstanceProfile(profile)
	if !ok {
		t.Fatalf("IAM has no instance profile %s", profile)
	}
	if want := "/nodewright/" + s.Region + "/" + s.ClusterName + "/" + string(class.UID) + "/"; p.Path != want || len(p.Roles) != 1 || p.Roles[0] != second {
		t.Errorf("profile %s: path %s, roles %v; want path %s holding %s", profile, p.Path, p.Roles, want, second)
	}
	launched := 0
	for _, in := range s.Sim.Instances() {
		if in.State == "pending" || in.State == "running" {
			launched++
			if in.IAMInstanceProfile != p.ARN {
				t.Errorf("instance %s: instance profile %q, want %q", in.ID, in.IAMInstanceProfile, p.ARN)
			}
		}
	}
	if launched != 1 {
		t.Errorf("%d live instances, want 1", launched)
	}

	forbidden := eventuallyClass(t, s, "forbidden", time.Minute, func(nc *v1.EC2NodeClass) bool {
		c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInstanceProfileReady)
		return c != nil && c.Status == metav1.ConditionFalse
	}, getClass)
	c := meta.FindStatusCondition(forbidden.Status.Conditions, v1.ConditionTypeInstanceProfileReady)
	if c.Reason != v1.ConditionReasonRoleNotAllowed || !strings.Contains(c.Message, `spec.role "Forbidden"`) {
		t.Errorf("forbidden class InstanceProfileReady = %+v, want RoleNotAllowed naming spec.role", c)
	}
	if forbidden.Status.InstanceProfile != "" || len(s.IAM.InstanceProfiles()) != 1 {
		t.Errorf("a refused role got a profile: status %q, IAM %+v", forbidden.Status.InstanceProfile, s.IAM.InstanceProfiles())
	}

	if err := s.Dynamic.Resource(nodePoolResource).Delete(ctx, "second", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 2*time.Minute, "the NodePool's node gone", func(_ context.Context, st stack.Status) bool {
		return st.Nodes == 0 && st.Instances == 0
	})
	if _, ok := s.IAM.InstanceProfile(profile); !ok {
		t.Fatal("the profile was deleted while its class lives")
	}
	if err := s.Dynamic.Resource(ec2NodeClassResource).Delete(ctx, "second", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, time.Minute, "the deleted class's instance profile deleted", func(context.Context, stack.Status) bool {
		_, ok := s.IAM.InstanceProfile(profile)
		return !ok
	})
}

// eventuallyClass polls class name until cond holds or timeout passes.
func eventuallyClass(t *testing.T, s *stack.Stack, name string, timeout time.Duration, cond func(*v1.EC2NodeClass) bool, get func(string) *v1.EC2NodeClass) *v1.EC2NodeClass {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		nc := get(name)
		if cond(nc) {
			return nc
		}
		if time.Now().After(deadline) {
			t.Fatalf("EC2NodeClass %s: condition not met within %s; status %+v", name, timeout, nc.Status)
		}
		time.Sleep(time.Second)
	}
}
