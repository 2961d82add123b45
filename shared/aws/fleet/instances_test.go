package fleet_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/fleet"
	"github.com/nodewright/nodewright/shared/launch"
)

var launchTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ec2Instance(id, state string, tags map[string]string) ec2types.Instance {
	inst := ec2types.Instance{
		InstanceId: aws.String(id), InstanceType: "m5.large", ImageId: aws.String("ami-1"), SubnetId: aws.String("subnet-a2"),
		Placement:  &ec2types.Placement{AvailabilityZone: aws.String("us-east-1a")},
		State:      &ec2types.InstanceState{Name: ec2types.InstanceStateName(state)},
		LaunchTime: aws.Time(launchTime),
	}
	for k, v := range tags {
		inst.Tags = append(inst.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return inst
}

func clusterTags(cluster string) map[string]string {
	return map[string]string{"eks:eks-cluster-name": cluster, "karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default"}
}

func states(e *awstest.EC2) map[string]string {
	out := map[string]string{}
	for _, i := range e.Instances() {
		out[*i.InstanceId] = string(i.State.Name)
	}
	return out
}

func TestTerminate(t *testing.T) {
	tests := []struct {
		name       string
		existing   []string
		terminated []string // terminated before the call under test
		terminate  []string
		want       map[string]string
		wantCalls  int
	}{
		{name: "should terminate running instances in one call", existing: []string{"i-1", "i-2"}, terminate: []string{"i-2", "i-1"},
			want: map[string]string{"i-1": "terminated", "i-2": "terminated"}, wantCalls: 1},
		{name: "should succeed for an already terminated instance", existing: []string{"i-1"}, terminated: []string{"i-1"}, terminate: []string{"i-1", "i-1"},
			want: map[string]string{"i-1": "terminated"}, wantCalls: 1},
		{name: "should treat an unknown instance as terminated", terminate: []string{"i-gone"}, want: map[string]string{}, wantCalls: 1},
		{name: "should terminate the known instances of a batch with unknown ones", existing: []string{"i-1", "i-3"}, terminate: []string{"i-1", "i-2", "i-3"},
			want: map[string]string{"i-1": "terminated", "i-3": "terminated"}, wantCalls: 4},
		{name: "should do nothing for no instances", want: map[string]string{}, wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := awstest.NewEC2(t)
			for _, id := range tt.existing {
				e.AddInstance(ec2Instance(id, "running", nil))
			}
			if len(tt.terminated) > 0 {
				if _, err := e.TerminateInstances(t.Context(), &ec2.TerminateInstancesInput{InstanceIds: tt.terminated}); err != nil {
					t.Fatal(err)
				}
			}
			before := e.On.TerminateInstances.Count()
			if err := fleet.New(e).Terminate(t.Context(), tt.terminate...); err != nil {
				t.Fatalf("Terminate() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, states(e)); diff != "" {
				t.Errorf("states mismatch (-want +got):\n%s", diff)
			}
			if got := e.On.TerminateInstances.Count() - before; got != tt.wantCalls {
				t.Errorf("TerminateInstances calls = %d, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestTerminateErrors(t *testing.T) {
	e := awstest.NewEC2(t)
	e.AddInstance(ec2Instance("i-1", "running", nil))
	e.On.TerminateInstances.Err = awstest.APIError("UnauthorizedOperation", "no")
	err := fleet.New(e).Terminate(t.Context(), "i-1")
	if awserr.Classify(err) != awserr.Unauthorized {
		t.Errorf("Terminate() error = %v, want an unauthorized error", err)
	}
}

func TestList(t *testing.T) {
	e := awstest.NewEC2(t)
	e.PageSize = 1
	e.AddInstance(ec2Instance("i-3", "running", clusterTags("prod")))
	e.AddInstance(ec2Instance("i-1", "pending", clusterTags("prod")))
	e.AddInstance(ec2Instance("i-2", "terminated", clusterTags("prod")))
	e.AddInstance(ec2Instance("i-4", "running", clusterTags("staging")))
	e.AddInstance(ec2Instance("i-5", "running", map[string]string{"eks:eks-cluster-name": "prod"}))
	spot := ec2Instance("i-6", "stopping", clusterTags("prod"))
	spot.InstanceLifecycle = ec2types.InstanceLifecycleTypeSpot
	e.AddInstance(spot)
	got, err := fleet.New(e).List(t.Context(), "prod")
	if err != nil {
		t.Fatalf("List() error = %v", err)
	}
	want := []launch.Instance{
		{ID: "i-1", InstanceType: "m5.large", Zone: "us-east-1a", SubnetID: "subnet-a2", CapacityType: "on-demand", ImageID: "ami-1", State: "pending", LaunchTime: launchTime, Tags: clusterTags("prod")},
		{ID: "i-3", InstanceType: "m5.large", Zone: "us-east-1a", SubnetID: "subnet-a2", CapacityType: "on-demand", ImageID: "ami-1", State: "running", LaunchTime: launchTime, Tags: clusterTags("prod")},
		{ID: "i-6", InstanceType: "m5.large", Zone: "us-east-1a", SubnetID: "subnet-a2", CapacityType: "spot", ImageID: "ami-1", State: "stopping", LaunchTime: launchTime, Tags: clusterTags("prod")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List() mismatch (-want +got):\n%s", diff)
	}
	if n := e.On.DescribeInstances.Count(); n != 3 {
		t.Errorf("DescribeInstances calls = %d, want 3 pages", n)
	}
}

func TestGet(t *testing.T) {
	e := awstest.NewEC2(t)
	e.AddInstance(ec2Instance("i-1", "running", clusterTags("prod")))
	e.AddInstance(ec2Instance("i-2", "terminated", clusterTags("prod")))
	c := fleet.New(e)
	got, err := c.Get(t.Context(), "i-1")
	if err != nil {
		t.Fatalf("Get() error = %v", err)
	}
	if got.ID != "i-1" || got.ProviderID() != "aws:///us-east-1a/i-1" {
		t.Errorf("Get() = %+v", got)
	}
	for _, id := range []string{"i-2", "i-missing"} {
		if _, err := c.Get(t.Context(), id); !errors.Is(err, fleet.ErrNotFound) {
			t.Errorf("Get(%s) error = %v, want ErrNotFound", id, err)
		}
	}
}
