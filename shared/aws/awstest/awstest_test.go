package awstest_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/aws/awstest"
)

// recorder is a testing.TB that records Errorf instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func fleetInput(token string, types ...string) *ec2.CreateFleetInput {
	var ovs []ec2types.FleetLaunchTemplateOverridesRequest
	for i, it := range types {
		ovs = append(ovs, ec2types.FleetLaunchTemplateOverridesRequest{
			InstanceType: ec2types.InstanceType(it), AvailabilityZone: aws.String("us-east-1a"), SubnetId: aws.String("subnet-1"), Priority: aws.Float64(float64(i)),
		})
	}
	return &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant, ClientToken: aws.String(token),
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: "spot"},
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
			Overrides:                   ovs,
		}},
	}
}

func TestCreateFleetClientToken(t *testing.T) {
	e := awstest.NewEC2(t)
	e.AddLaunchTemplate("lt", "ami-1")
	first, err := e.CreateFleet(t.Context(), fleetInput("tok", "m5.large"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.CreateFleet(t.Context(), fleetInput("tok", "m5.large"))
	if err != nil || again.Instances[0].InstanceIds[0] != first.Instances[0].InstanceIds[0] {
		t.Errorf("repeated token: %v, %v; want the first fleet", again, err)
	}
	if _, err := e.CreateFleet(t.Context(), fleetInput("tok", "c5.large")); awserr.Code(err) != "IdempotentParameterMismatch" {
		t.Errorf("changed request with the same token: error = %v, want IdempotentParameterMismatch", err)
	}
	if n := len(e.Instances()); n != 1 {
		t.Errorf("instances = %d, want 1", n)
	}
}

func TestCreateFleetUnavailablePools(t *testing.T) {
	e := awstest.NewEC2(t)
	e.AddLaunchTemplate("lt", "ami-1")
	e.SetUnavailable(false, awstest.Pool{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"})
	out, err := e.CreateFleet(t.Context(), fleetInput("t1", "m5.large", "c5.large"))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" || out.Instances[0].InstanceType != "c5.large" {
		t.Errorf("CreateFleet() = %+v, want an ICE error for m5.large and a c5.large instance", out)
	}
	inst := e.Instances()[0]
	if inst.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot || aws.ToString(inst.ImageId) != "ami-1" {
		t.Errorf("instance = %+v, want a spot instance of the template's image", inst)
	}
}

func TestCallScriptingOrder(t *testing.T) {
	s := awstest.NewSSM(t)
	s.Put("/p", "v")
	queued := awstest.APIError("ThrottlingException", "queued")
	s.On.GetParameter.Push(nil, queued)
	in := &ssm.GetParameterInput{Name: aws.String("/p")}
	if _, err := s.GetParameter(t.Context(), in); !errors.Is(err, queued) {
		t.Errorf("first call error = %v, want the queued one", err)
	}
	if out, err := s.GetParameter(t.Context(), in); err != nil || aws.ToString(out.Parameter.Value) != "v" {
		t.Errorf("second call = %v, %v; want the default behaviour", out, err)
	}
	s.On.GetParameter.Err = awstest.APIError("AccessDeniedException", "no")
	if _, err := s.GetParameter(t.Context(), in); awserr.Classify(err) != awserr.Unauthorized {
		t.Errorf("scripted Err: %v", err)
	}
	if n := len(s.On.GetParameter.Inputs()); n != 3 {
		t.Errorf("inputs = %d, want 3", n)
	}
	if _, err := awstest.NewSSM(t).GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String("/missing")}); awserr.Classify(err) != awserr.NotFound {
		t.Errorf("missing parameter: %v, want not found", err)
	}
}

func TestFilters(t *testing.T) {
	e := awstest.NewEC2(t)
	e.AddImage(ec2types.Image{ImageId: aws.String("ami-1"), Name: aws.String("eks-node-1.33-v1"), Architecture: "x86_64"})
	e.AddImage(ec2types.Image{ImageId: aws.String("ami-2"), Name: aws.String("eks-node-1.32-v1"), Architecture: "x86_64"})
	e.AddImage(ec2types.Image{ImageId: aws.String("ami-3"), Name: aws.String("other"), Architecture: "arm64"})
	out, err := e.DescribeImages(t.Context(), &ec2.DescribeImagesInput{Filters: []ec2types.Filter{
		{Name: aws.String("name"), Values: []string{"eks-node-1.3?-*", "nope"}},
		{Name: aws.String("architecture"), Values: []string{"x86_64"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Images) != 2 {
		t.Errorf("images = %d, want 2 (wildcards; values ORed, filters ANDed)", len(out.Images))
	}
	r := &recorder{TB: t}
	e2 := awstest.NewEC2(r)
	e2.AddImage(ec2types.Image{ImageId: aws.String("ami-1")})
	if _, err := e2.DescribeImages(t.Context(), &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("platform"), Values: []string{"windows"}}}}); err == nil || len(r.errors) != 1 {
		t.Errorf("an unsupported filter: error %v, reported %v; want both", err, r.errors)
	}
}
