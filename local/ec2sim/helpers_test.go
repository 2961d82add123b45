package ec2sim_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/aws/awserr"
)

// epoch is the fake clock's start in every test.
var epoch = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)

// env is one simulator behind an httptest server with real SDK clients.
type env struct {
	sim   *ec2sim.Server
	clock *ec2sim.FakeClock
	url   string
	ec2   *ec2.Client
	ssm   *ssm.Client
}

// newEnv starts a simulator (a fresh one per test) on a fake clock and
// returns EC2 and SSM clients over ec2sim.LoopbackTransport with retries
// off, so every injected error reaches the test and every call is one
// recorded attempt. Tests that want the SDK's retries pass withRetries.
func newEnv(t testing.TB, opts ec2sim.Options) *env {
	t.Helper()
	clock := ec2sim.NewFakeClock(epoch)
	if opts.Clock == nil {
		opts.Clock = clock
	}
	sim, err := ec2sim.New(opts)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	creds := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")
	httpClient := &http.Client{Transport: ec2sim.LoopbackTransport(srv.Client().Transport)}
	return &env{
		sim:   sim,
		clock: clock,
		url:   srv.URL,
		ec2: ec2.New(ec2.Options{Region: sim.Region(), BaseEndpoint: aws.String(srv.URL), Credentials: creds,
			HTTPClient: httpClient, RetryMaxAttempts: 1}),
		ssm: ssm.New(ssm.Options{Region: sim.Region(), BaseEndpoint: aws.String(srv.URL), Credentials: creds,
			HTTPClient: httpClient, RetryMaxAttempts: 1}),
	}
}

// fastRetryer is the standard retryer without backoff delay or retry quota.
func fastRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 3
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		o.RateLimiter = ratelimit.None
	})
}

// withRetries gives one EC2 call the standard retryer with 3 attempts and
// no backoff.
func withRetries(o *ec2.Options) {
	o.Retryer = fastRetryer()
	o.RetryMaxAttempts = 3
}

// param reads an SSM parameter through the SDK.
func (e *env) param(t testing.TB, name string) string {
	t.Helper()
	out, err := e.ssm.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatalf("GetParameter(%s) error = %v", name, err)
	}
	return aws.ToString(out.Parameter.Value)
}

// al2023 returns the current AL2023 standard AMI of arch for Kubernetes 1.33.
func (e *env) al2023(t testing.TB, arch string) string {
	t.Helper()
	return e.param(t, "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/"+arch+"/standard/recommended/image_id")
}

// subnets returns the private subnet IDs, one per zone, in zone order.
func (e *env) subnets() map[string]string {
	out := map[string]string{}
	for _, sn := range e.sim.Network().Subnets {
		if !sn.Public {
			out[sn.Zone] = sn.ID
		}
	}
	return out
}

// createLT creates a launch template with an image and user data.
func (e *env) createLT(t testing.TB, name, imageID, userData string) string {
	t.Helper()
	out, err := e.ec2.CreateLaunchTemplate(t.Context(), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:  aws.String(imageID),
			UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(userData))),
		},
	})
	if err != nil {
		t.Fatalf("CreateLaunchTemplate(%s) error = %v", name, err)
	}
	return aws.ToString(out.LaunchTemplate.LaunchTemplateId)
}

// fleetInput builds an instant CreateFleet request over one launch template
// with one override per (type, zone).
func fleetInput(lt, capacityType string, n int32, types []string, subnets []string) *ec2.CreateFleetInput {
	var ovs []ec2types.FleetLaunchTemplateOverridesRequest
	for _, it := range types {
		for _, sn := range subnets {
			ovs = append(ovs, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(it), SubnetId: aws.String(sn)})
		}
	}
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides:                   ovs,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(n), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(capacityType)},
		SpotOptions:     &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
	}
	return in
}

// launched flattens a CreateFleet answer into "type/zone/lifecycle" per
// instance, in answer order.
func launched(out *ec2.CreateFleetOutput) []string {
	var got []string
	for _, in := range out.Instances {
		for range in.InstanceIds {
			got = append(got, string(in.InstanceType)+"/"+aws.ToString(in.LaunchTemplateAndOverrides.Overrides.AvailabilityZone)+"/"+string(in.Lifecycle))
		}
	}
	return got
}

// fleetErrors flattens CreateFleet errors into "code type/zone/lifecycle".
func fleetErrors(out *ec2.CreateFleetOutput) []string {
	var got []string
	for _, e := range out.Errors {
		o := e.LaunchTemplateAndOverrides.Overrides
		got = append(got, aws.ToString(e.ErrorCode)+" "+string(o.InstanceType)+"/"+aws.ToString(o.AvailabilityZone)+"/"+string(e.Lifecycle))
	}
	return got
}

// instanceIDs returns the IDs of a CreateFleet answer in order.
func instanceIDs(out *ec2.CreateFleetOutput) []string {
	var ids []string
	for _, in := range out.Instances {
		ids = append(ids, in.InstanceIds...)
	}
	return ids
}

// describe returns the instances of ids keyed by ID.
func (e *env) describe(t *testing.T, ids ...string) map[string]ec2types.Instance {
	t.Helper()
	out, err := e.ec2.DescribeInstances(t.Context(), &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		t.Fatalf("DescribeInstances(%v) error = %v", ids, err)
	}
	got := map[string]ec2types.Instance{}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			got[aws.ToString(in.InstanceId)] = in
		}
	}
	return got
}

// stateOf returns one instance's state name through DescribeInstances.
func (e *env) stateOf(t *testing.T, id string) string {
	t.Helper()
	return string(e.describe(t, id)[id].State.Name)
}

// apiCode returns err's API error code and HTTP status.
func apiCode(err error) (code string, status int) {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return awserr.Code(err), status
}

// sorted returns a sorted copy.
func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
