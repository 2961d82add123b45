package nodeclass

import (
	"context"
	"errors"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awserr"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// DryRunAPI is the subset of the EC2 client the authorization dry runs
// call.
type DryRunAPI interface {
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	RunInstances(context.Context, *ec2.RunInstancesInput, ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
}

var _ DryRunAPI = (*ec2.Client)(nil)

// dryRunCode is EC2's answer to a dry run that would have succeeded.
const dryRunCode = "DryRunOperation"

// AuthDryRuns makes a class's authorization dry runs
// (provisioning.AuthDryRunner), as Karpenter's validation controller does
// (aws: pkg/controllers/nodeclass/validation.go).
type AuthDryRuns struct {
	// API makes the dry runs (*ec2.Client).
	API DryRunAPI
	// Templates ensures the launch template the CreateFleet and
	// RunInstances dry runs name.
	Templates *Resolver
	// Cluster is what the launch template's user data needs.
	Cluster Cluster
}

var _ provisioning.AuthDryRunner = AuthDryRuns{}

// DryRunAuthorization dry-runs, in order, CreateLaunchTemplate (the
// launch template a NodeClaim of nc with no node pool would get: image,
// instance profile, security groups, user data, launch tags), CreateFleet
// (instant, on-demand, one instance of it in each status subnet, tagged as
// launches tag instances, volumes and the fleet) and RunInstances (it in
// the first subnet, tagged as instances, volumes and network interfaces
// are), each with DryRun and without SDK retries, so the IAM conditions on
// request tags meet the same tags as real calls. Between the first and the
// second it ensures that launch template (describing it, creating it when
// missing), since the other two name it; Karpenter likewise creates it.
// It stops at the first result that is not AuthAllowed: DryRunOperation
// is AuthAllowed, an authorization error (UnauthorizedOperation,
// AuthFailure.*) AuthDenied with EC2's message, anything else (throttling,
// server errors, a request nc cannot build) AuthInconclusive.
func (d AuthDryRuns) DryRunAuthorization(ctx context.Context, nc *v1.EC2NodeClass, it *catalog.InstanceType) []provisioning.AuthResult {
	noRetry := func(o *ec2.Options) { o.Retryer = aws.NopRetryer{} }
	claim := &v1.NodeClaim{}
	claim.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: nc.Name}
	req := TemplateRequest{Cluster: d.Cluster, NodeClass: nc, NodeClaim: claim, CapacityType: v1.CapacityTypeOnDemand, InstanceTypes: []*catalog.InstanceType{it}}
	wanted, err := templates(req)
	if err != nil || len(wanted) == 0 {
		return []provisioning.AuthResult{inconclusive(provisioning.ActionCreateLaunchTemplate, err)}
	}
	w := wanted[0]
	var out []provisioning.AuthResult
	_, err = d.API.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		DryRun:             aws.Bool(true),
		LaunchTemplateName: aws.String(w.name),
		LaunchTemplateData: w.data,
		TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: w.tags}},
	}, noRetry)
	if out = append(out, classifyDryRun(provisioning.ActionCreateLaunchTemplate, err)); !allowed(out) {
		return out
	}
	if _, err := d.Templates.EnsureLaunchTemplates(ctx, req); err != nil {
		r := classifyDryRun(provisioning.ActionCreateLaunchTemplate, err)
		if r.Outcome == provisioning.AuthAllowed {
			r = inconclusive(provisioning.ActionCreateLaunchTemplate, err)
		}
		return append(out[:0], r)
	}
	lt := &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(w.name), Version: aws.String("$Latest")}
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	for _, sn := range nc.Status.Subnets {
		overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceType(it.Name), SubnetId: aws.String(sn.ID)})
	}
	tags := amifamily.LaunchTags(d.Cluster.Name, "", nc.Name, nc.Spec.Tags)
	_, err = d.API.CreateFleet(ctx, &ec2.CreateFleetInput{
		DryRun:                aws.Bool(true),
		Type:                  ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: lt, Overrides: overrides}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand,
		},
		OnDemandOptions:   &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		TagSpecifications: dryRunTagSpecs(tags, ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume, ec2types.ResourceTypeFleet),
	}, noRetry)
	if out = append(out, classifyDryRun(provisioning.ActionCreateFleet, err)); !allowed(out) {
		return out
	}
	run := &ec2.RunInstancesInput{
		DryRun:   aws.Bool(true),
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		InstanceType:   ec2types.InstanceType(it.Name),
		LaunchTemplate: &ec2types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(w.name), Version: aws.String("$Latest")},
		TagSpecifications: dryRunTagSpecs(tags, ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume,
			ec2types.ResourceTypeNetworkInterface),
	}
	if len(nc.Status.Subnets) > 0 {
		subnet := nc.Status.Subnets[0].ID
		if len(w.data.NetworkInterfaces) > 0 {
			// The template's interfaces carry the security groups; the
			// subnet goes on the primary interface.
			run.NetworkInterfaces = []ec2types.InstanceNetworkInterfaceSpecification{{DeviceIndex: aws.Int32(0), SubnetId: aws.String(subnet)}}
		} else {
			run.SubnetId = aws.String(subnet)
		}
	}
	_, err = d.API.RunInstances(ctx, run, noRetry)
	return append(out, classifyDryRun(provisioning.ActionRunInstances, err))
}

// allowed reports whether the last result is AuthAllowed.
func allowed(rs []provisioning.AuthResult) bool {
	return rs[len(rs)-1].Outcome == provisioning.AuthAllowed
}

// classifyDryRun classifies a dry run's error (see DryRunAuthorization).
// A nil error, which EC2 never sends for a dry run, counts as allowed.
func classifyDryRun(action string, err error) provisioning.AuthResult {
	switch {
	case err == nil, awserr.Code(err) == dryRunCode:
		return provisioning.AuthResult{Action: action, Outcome: provisioning.AuthAllowed}
	case awserr.Classify(err) == awserr.Unauthorized:
		msg := err.Error()
		var apiErr interface{ ErrorMessage() string }
		if errors.As(err, &apiErr) {
			msg = apiErr.ErrorMessage()
		}
		return provisioning.AuthResult{Action: action, Outcome: provisioning.AuthDenied, Detail: msg}
	}
	return inconclusive(action, err)
}

func inconclusive(action string, err error) provisioning.AuthResult {
	detail := "no request could be built"
	if err != nil {
		detail = err.Error()
	}
	return provisioning.AuthResult{Action: action, Outcome: provisioning.AuthInconclusive, Detail: detail}
}

// dryRunTagSpecs tags each resource type with tags (sorted by key).
func dryRunTagSpecs(tags map[string]string, types ...ec2types.ResourceType) []ec2types.TagSpecification {
	list := tagList(tags)
	out := make([]ec2types.TagSpecification, len(types))
	for i, rt := range types {
		out[i] = ec2types.TagSpecification{ResourceType: rt, Tags: slices.Clone(list)}
	}
	return out
}
