package fleet_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/fleet"
)

func TestLaunchSkipsUnavailableSubnets(t *testing.T) {
	tests := []struct {
		name        string
		unavailable []string
		want        []string
	}{
		{
			name: "should use every zone's subnet with the most free addresses when none is marked",
			want: []string{"m5.large us-east-1a subnet-a2", "m5.large us-east-1b subnet-b1", "m5.large us-east-1c subnet-c1"},
		},
		{
			name:        "should fall back to the zone's other subnet when the fuller one is marked",
			unavailable: []string{"subnet-a2"},
			want:        []string{"m5.large us-east-1a subnet-a1", "m5.large us-east-1b subnet-b1", "m5.large us-east-1c subnet-c1"},
		},
		{
			name:        "should leave a zone out only when all its subnets are marked",
			unavailable: []string{"subnet-a1", "subnet-a2"},
			want:        []string{"m5.large us-east-1b subnet-b1", "m5.large us-east-1c subnet-c1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ec2api := awstest.NewEC2(t)
			r := request(ec2api, nodeClaim(), instanceType("m5.large", 2, 0.096, 0))
			for i := range r.Subnets {
				for _, id := range tt.unavailable {
					if r.Subnets[i].ID == id {
						r.Subnets[i].Unavailable = true
					}
				}
			}
			if _, err := fleet.New(ec2api).Launch(t.Context(), r); err != nil {
				t.Fatalf("Launch() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, overrideKeys(t, ec2api)); diff != "" {
				t.Errorf("overrides mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLaunchRetriesOnceWhenTheLaunchTemplateVanished(t *testing.T) {
	notFound := awstest.APIError(awserr.CodeLaunchTemplateNameNotFound, "At least one of the launch templates specified in the request does not exist.")
	fleetNotFound := &ec2.CreateFleetOutput{FleetId: aws.String("fleet-1"), Errors: []ec2types.CreateFleetError{{
		ErrorCode: aws.String(awserr.CodeLaunchTemplateNameNotFound), ErrorMessage: aws.String("gone"),
	}}}
	claim := nodeClaim()
	tests := []struct {
		name       string
		responses  func(*awstest.EC2)
		wantErr    bool
		wantCalls  int
		wantTokens []string
		wantLTAsks int
	}{
		{
			name:       "should ensure the templates again and retry with the same token when the call was rejected",
			responses:  func(e *awstest.EC2) { e.On.CreateFleet.Push(nil, notFound) },
			wantCalls:  2,
			wantTokens: []string{fleet.ClientToken(claim), fleet.ClientToken(claim)},
			wantLTAsks: 2,
		},
		{
			name:       "should retry with the retry token when EC2 created a fleet reporting the error",
			responses:  func(e *awstest.EC2) { e.On.CreateFleet.Push(fleetNotFound, nil) },
			wantCalls:  2,
			wantTokens: []string{fleet.ClientToken(claim), fleet.RetryClientToken(claim)},
			wantLTAsks: 2,
		},
		{
			name: "should retry only once",
			responses: func(e *awstest.EC2) {
				e.On.CreateFleet.Push(nil, notFound)
				e.On.CreateFleet.Push(nil, notFound)
			},
			wantErr:    true,
			wantCalls:  2,
			wantTokens: []string{fleet.ClientToken(claim), fleet.ClientToken(claim)},
			wantLTAsks: 2,
		},
		{
			name: "should not retry other errors",
			responses: func(e *awstest.EC2) {
				e.On.CreateFleet.Push(nil, awstest.APIError("RequestLimitExceeded", "slow down"))
			},
			wantErr:    true,
			wantCalls:  1,
			wantTokens: []string{fleet.ClientToken(claim)},
			wantLTAsks: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ec2api := awstest.NewEC2(t)
			tt.responses(ec2api)
			r := request(ec2api, claim, instanceType("m5.large", 2, 0.096, 0))
			res, err := fleet.New(ec2api).Launch(t.Context(), r)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Launch() error = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && res.Instance.ID == "" {
				t.Errorf("Launch() = %+v, want an instance", res)
			}
			var tokens []string
			for _, in := range ec2api.On.CreateFleet.Inputs() {
				tokens = append(tokens, aws.ToString(in.ClientToken))
			}
			if diff := cmp.Diff(tt.wantTokens, tokens); diff != "" {
				t.Errorf("CreateFleet client tokens mismatch (-want +got):\n%s", diff)
			}
			if got := len(r.Templates.(*templates).requests); got != tt.wantLTAsks {
				t.Errorf("template requests = %d, want %d", got, tt.wantLTAsks)
			}
		})
	}
}

// tagAPI adds a recorded CreateTags to the EC2 double.
type tagAPI struct {
	*awstest.EC2
	calls []*ec2.CreateTagsInput
	err   error
}

func (a *tagAPI) CreateTags(_ context.Context, in *ec2.CreateTagsInput, _ ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	a.calls = append(a.calls, in)
	return &ec2.CreateTagsOutput{}, a.err
}

func TestTagger(t *testing.T) {
	ec2api := awstest.NewEC2(t)
	ec2api.AddInstance(ec2types.Instance{InstanceId: aws.String("i-1"), State: &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
		Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String("mine")}}})
	api := &tagAPI{EC2: ec2api}
	tg := fleet.NewTagger(api)

	tags, err := tg.InstanceTags(t.Context(), "i-1")
	if err != nil {
		t.Fatalf("InstanceTags() error = %v", err)
	}
	if diff := cmp.Diff(map[string]string{"Name": "mine"}, tags); diff != "" {
		t.Errorf("InstanceTags() mismatch (-want +got):\n%s", diff)
	}
	if _, err := tg.InstanceTags(t.Context(), "i-gone"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("InstanceTags(missing) error = %v, want ErrNotFound", err)
	}

	if err := tg.AddTags(t.Context(), "i-1", nil); err != nil || len(api.calls) != 0 {
		t.Fatalf("AddTags(no tags) = %v with %d calls, want no call", err, len(api.calls))
	}
	if err := tg.AddTags(t.Context(), "i-1", map[string]string{"karpenter.sh/nodeclaim": "c1", "eks:eks-cluster-name": "prod"}); err != nil {
		t.Fatalf("AddTags() error = %v", err)
	}
	want := &ec2.CreateTagsInput{Resources: []string{"i-1"}, Tags: []ec2types.Tag{
		{Key: aws.String("eks:eks-cluster-name"), Value: aws.String("prod")},
		{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("c1")},
	}}
	if diff := cmp.Diff(want, api.calls[0], sdkOpts); diff != "" {
		t.Errorf("CreateTags input mismatch (-want +got):\n%s", diff)
	}
	api.err = awstest.APIError("InvalidInstanceID.NotFound", "gone")
	if err := tg.AddTags(t.Context(), "i-1", map[string]string{"Name": "n"}); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("AddTags(missing) error = %v, want ErrNotFound", err)
	}
}
