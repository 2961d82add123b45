package stack_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// validationOf returns the class status's ValidationSucceeded condition.
func validationOf(st v1.EC2NodeClassStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, v1.ConditionTypeValidationSucceeded)
}

// TestValidationSucceededDenyThenRecover: the simulator denies
// ec2:CreateFleet to the stack's controller role, so the provisioner's
// dry runs fail; the guide's EC2NodeClass goes ValidationSucceeded=False
// with Karpenter's CreateFleetAuthCheckFailed naming the permission, it
// is not Ready, and a pending pod is not launched (no CreateFleet call
// beyond dry runs). The permission is granted
// back; the verdict stands until its 30 minutes have passed on the
// provisioner's clock (moved ahead, not waited for), then
// ValidationSucceeded goes True and the pod launches.
func TestValidationSucceededDenyThenRecover(t *testing.T) {
	var ahead atomic.Int64
	s := startStack(t, func(o *stack.Options) {
		o.ProvisionerClock = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	})
	if err := s.Sim.Deny(ec2sim.Denial{Action: provisioning.ActionCreateFleet}); err != nil {
		t.Fatal(err)
	}
	applyGuide(t, s)
	if _, err := s.Kube.AppsV1().Deployments("default").Create(t.Context(), deployment("inflate", 1, "500m", "512Mi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var class v1.EC2NodeClassStatus
	eventually(t, s, 2*time.Minute, "EC2NodeClass ValidationSucceeded=False", func(context.Context, stack.Status) bool {
		class = v1.EC2NodeClassStatus{}
		readStatus(t, s, "ec2nodeclass", &class)
		c := validationOf(class)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	c := validationOf(class)
	if c.Reason != provisioning.ReasonCreateFleetAuthCheckFailed || !strings.Contains(c.Message, "ec2:CreateFleet") {
		t.Errorf("ValidationSucceeded = %+v; want reason %s and a message naming ec2:CreateFleet", c, provisioning.ReasonCreateFleetAuthCheckFailed)
	}
	if readyOf(class.Conditions) != metav1.ConditionFalse {
		t.Errorf("EC2NodeClass Ready = %q in %+v; want False", readyOf(class.Conditions), class.Conditions)
	}
	// A few more rounds: the pod stays pending and nothing launches.
	time.Sleep(5 * time.Second)
	st, err := s.Observe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.PendingPods != 1 || st.Instances != 0 {
		t.Errorf("status while denied = %+v; want the pod pending and no instance", st)
	}
	if n := len(s.Sim.CallsTo("CreateFleet")); n != 0 {
		t.Errorf("%d CreateFleet calls (not dry runs) while denied; want none", n)
	}

	s.Sim.Allow(provisioning.ActionCreateFleet)
	time.Sleep(3 * time.Second)
	readStatus(t, s, "ec2nodeclass", &class)
	if c := validationOf(class); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("ValidationSucceeded right after the grant = %+v; want the cached False verdict to stand", c)
	}
	ahead.Store(int64(provisioning.AuthCheckTTL + time.Minute))
	eventually(t, s, 2*time.Minute, "EC2NodeClass ValidationSucceeded=True and the pod running", func(_ context.Context, st stack.Status) bool {
		class = v1.EC2NodeClassStatus{}
		readStatus(t, s, "ec2nodeclass", &class)
		c := validationOf(class)
		return c != nil && c.Status == metav1.ConditionTrue && st.RunningPods == 1 && st.PendingPods == 0
	})
	if readyOf(class.Conditions) != metav1.ConditionTrue {
		t.Errorf("EC2NodeClass Ready = %q after recovery; want True", readyOf(class.Conditions))
	}
}
