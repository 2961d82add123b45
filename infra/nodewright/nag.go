package nodewright

import (
	"maps"
	"slices"

	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Reasons for the cdk-nag AwsSolutions findings this design accepts. Each
// names why the flagged shape is the narrowest that works.
const (
	reasonNoResourceLevel = "EC2 Describe* calls, the Lambda VPC network-interface actions, X-Ray's PutTraceSegments and " +
		"CloudWatch Logs' log-delivery actions support no resource-level permissions (Service Authorization Reference); " +
		"the Describe statements are limited to the stack's region with aws:RequestedRegion."
	reasonInstanceProfiles = "nodewright names an EC2NodeClass's instance profile after the class's UID and role when it " +
		"resolves the class, so the profiles cannot be listed in advance: the statements cover only nodewright's path for " +
		"this cluster and region (/nodewright/<region>/<cluster>/), and every change requires the cluster's ownership tags " +
		"(aws:RequestTag on creation, aws:ResourceTag afterwards), as Karpenter's tag-conditioned profile statements (karpenter-spec 4.1)."
	reasonNodeRolePath = "Props.NodeRolePathPrefix allows every node role under that IAM path by the deployer's choice; " +
		"iam:PassRole to it is further limited to EC2 (iam:PassedToService)."
	reasonEC2Created = "EC2 names the fleets, instances, volumes, network interfaces, launch templates and spot requests " +
		"it creates only when it creates them, so they cannot be listed in advance: every statement on them requires " +
		"the cluster's tags (aws:RequestTag on creation, aws:ResourceTag afterwards), as Karpenter's controller policy " +
		"does (karpenter-spec 4.1), and they are limited to this account and region."
	reasonEC2Referenced = "The AMIs, snapshots, subnets, security groups, capacity reservations and placement groups a " +
		"launch uses are chosen at run time by the user's EC2NodeClass selectors (Amazon's AMIs cannot carry the " +
		"user's tags), so launches may reference any of them in this region, as Karpenter's controller policy allows; " +
		"a launch also needs the tag-conditioned grants on what it creates."
	reasonSSMPublic = "AMI aliases (al2023@latest, bottlerocket@...) resolve through AWS's public SSM parameters under " +
		"/aws/service/, whose names depend on the EC2NodeClass, the architecture and the Kubernetes version; the " +
		"grant is read-only and limited to that public path, as in Karpenter's controller policy."
	reasonExecuteAPI = "The forwarder may call every method of the intake API's /v1 routes on its deployed stage, and " +
		"nothing else; the API's resource policy denies every other principal."
	reasonNodeRoleManaged = "EKS nodes need these AWS managed policies (the EKS node IAM role documentation, and " +
		"Karpenter's reference node role): kubelet and node registration (AmazonEKSWorkerNodePolicy), the VPC CNI " +
		"(AmazonEKS_CNI_Policy), image pulls (AmazonEC2ContainerRegistryPullOnly) and Session Manager " +
		"(AmazonSSMManagedInstanceCore). AWS keeps them current as EKS changes; the role is assumable by EC2 only."
	reasonLookupManaged = "CDK's AwsCustomResource provider runs one eks:DescribeCluster at deploy time (its policy " +
		"names only this cluster); the managed policy AWSLambdaBasicExecutionRole only lets it write its own logs."
	reasonValidation = "The intake Lambda validates every request against the versioned contract and answers 4xx naming " +
		"the field path at fault (shared/apis/v1); API Gateway models would duplicate that schema and answer without " +
		"field paths. Bodies over the contract's limit are refused before decoding."
	reasonWAF = "The API accepts only SigV4-signed requests from one IAM role (IAM authorization plus a resource policy " +
		"denying every other principal), and the stage is throttled; a web ACL would add cost without a threat it stops."
	reasonExecutionLogs = "Execution logging needs the account-wide API Gateway CloudWatch role, a per-region singleton " +
		"that other stacks may own; every request is in the stage's access log, and the intake Lambda logs each request " +
		"with its status."
	reasonCognito = "The caller is a workload, not a user: requests are authorized with IAM (SigV4) and the resource " +
		"policy admits only the forwarder's role."
	reasonExecutionStatus = "The stale-lease sweep asks Step Functions whether the execution that holds a budget " +
		"claim has ended (states:DescribeExecution) before handing its node back; execution names are per command " +
		"(drift-<nodeclaim>-<hash>), so the grant covers the executions of this stack's own state machines only."
	reasonDeadLetters = "This queue is itself the dead-letter queue of the EventBridge Scheduler schedules (their " +
		"target DeadLetterConfig) and of the interruption rules' targets, which cdk-nag cannot see; it is alarmed on depth."
)

type suppression struct {
	id        string
	reason    string
	appliesTo []string // regular expressions over cdk-nag's finding data; none: the whole rule
}

func (s suppression) nag() *cdknag.NagPackSuppression {
	out := &cdknag.NagPackSuppression{Id: jsii.String(s.id), Reason: jsii.String(s.reason)}
	if len(s.appliesTo) > 0 {
		var applies []any
		for _, re := range s.appliesTo {
			applies = append(applies, &cdknag.RegexAppliesTo{Regex: jsii.String("/" + re + "/")})
		}
		out.AppliesTo = &applies
	}
	return out
}

func suppress(construct any, ss ...suppression) {
	var out []*cdknag.NagPackSuppression
	for _, s := range ss {
		out = append(out, s.nag())
	}
	cdknag.NagSuppressions_AddResourceSuppressions(construct, &out, jsii.Bool(true))
}

// Finding data patterns (cdk-nag renders tokens as <Logical.Attr> and
// pseudo parameters as <AWS::Name>).
const (
	findingAnyResource  = `^Resource::\*$`
	findingEC2Created   = `^Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:(fleet|instance|volume|network-interface|launch-template|spot-instances-request)/\*$`
	findingEC2Reference = `^Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:\*?:(image|snapshot|security-group|subnet|capacity-reservation|placement-group)/\*$`
	findingSSMPublic    = `^Resource::arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/\*$`
	findingExecuteAPI   = `^Resource::arn:<AWS::Partition>:execute-api:(<AWS::Region>|[a-z0-9-]+):(<AWS::AccountId>|[0-9]+):<[A-Za-z0-9]+>/<[A-Za-z0-9.]+>/\*/v1/\*$`
	findingManagedNode  = `^Policy::arn:<AWS::Partition>:iam::aws:policy/(AmazonEKSWorkerNodePolicy|AmazonEKS_CNI_Policy|AmazonEC2ContainerRegistryPullOnly|AmazonSSMManagedInstanceCore)$`
	findingExecutions   = `^Resource::arn:<AWS::Partition>:states:(<AWS::Region>|[a-z0-9-]+):(<AWS::AccountId>|[0-9]+):execution:[A-Za-z0-9-]+:\*$`
	findingProfiles     = `^Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/nodewright/<AWS::Region>/[A-Za-z0-9_-]+/\*$`
	findingRolePath     = `^Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:role/.+/\*$`
	findingManagedBasic = `^Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole$`
)

// awsCustomResourceID is the construct ID of CDK's AwsCustomResource
// provider, a singleton at the stack's root.
const awsCustomResourceID = "AWS679f53fac002430cb0da5b7982bd2287"

// addSuppressions records, on the resources they concern, the cdk-nag
// AwsSolutions findings this design accepts, each with its reason and,
// for wildcard findings, the exact resource patterns it covers.
func addSuppressions(d *deployment) {
	for _, name := range slices.Sorted(maps.Keys(d.functions)) {
		f := d.functions[name]
		var ss []suppression
		anyResource := f.spec.kube != nil && d.props.Network != nil
		ec2Created := false
		for _, g := range f.spec.grants {
			switch g {
			case grantResolve:
				anyResource = true
				ss = append(ss, suppression{id: "AwsSolutions-IAM5", reason: reasonSSMPublic, appliesTo: []string{findingSSMPublic}})
			case grantLaunch:
				anyResource = true
				if d.props.NodeRolePathPrefix != "" {
					ss = append(ss, suppression{id: "AwsSolutions-IAM5", reason: reasonNodeRolePath, appliesTo: []string{findingRolePath}})
				}
				ss = append(ss,
					suppression{id: "AwsSolutions-IAM5", reason: reasonEC2Created, appliesTo: []string{findingEC2Created}},
					suppression{id: "AwsSolutions-IAM5", reason: reasonEC2Referenced, appliesTo: []string{findingEC2Reference}})
			case grantListInstances, grantDescribeInstanceStatus, grantReadEC2Data:
				anyResource = true
			case grantTerminate, grantTerminateOwned, grantTagInstances:
				ec2Created = true
			case grantCleanLaunchTemplates:
				anyResource, ec2Created = true, true
			case grantInstanceProfiles, grantCleanInstanceProfiles:
				ss = append(ss, suppression{id: "AwsSolutions-IAM5", reason: reasonInstanceProfiles, appliesTo: []string{findingProfiles}})
				if g == grantInstanceProfiles && d.props.NodeRolePathPrefix != "" {
					ss = append(ss, suppression{id: "AwsSolutions-IAM5", reason: reasonNodeRolePath, appliesTo: []string{findingRolePath}})
				}
			}
		}
		if ec2Created {
			ss = append(ss, suppression{id: "AwsSolutions-IAM5", reason: reasonEC2Created, appliesTo: []string{findingEC2Created}})
		}
		if len(f.spec.describes) > 0 {
			ss = append(ss, suppression{id: "AwsSolutions-IAM5", reason: reasonExecutionStatus, appliesTo: []string{findingExecutions}})
		}
		if anyResource {
			ss = append(ss, suppression{id: "AwsSolutions-IAM5", reason: reasonNoResourceLevel, appliesTo: []string{findingAnyResource}})
		}
		if len(ss) > 0 {
			suppress(f.role, ss...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(d.machines)) {
		suppress(d.machines[name].sm.Role(), suppression{id: "AwsSolutions-IAM5", reason: reasonNoResourceLevel, appliesTo: []string{findingAnyResource}})
	}
	suppress(d.forwarder, suppression{id: "AwsSolutions-IAM5", reason: reasonExecuteAPI, appliesTo: []string{findingExecuteAPI}})
	if d.props.NodeRoleName == "" {
		suppress(d.scope.Node().FindChild(jsii.String("NodeRole")), suppression{id: "AwsSolutions-IAM4", reason: reasonNodeRoleManaged, appliesTo: []string{findingManagedNode}})
	}
	suppress(d.api,
		suppression{id: "AwsSolutions-APIG2", reason: reasonValidation},
		suppression{id: "AwsSolutions-APIG3", reason: reasonWAF},
		suppression{id: "AwsSolutions-APIG6", reason: reasonExecutionLogs},
		suppression{id: "AwsSolutions-COG4", reason: reasonCognito})
	if d.deadLetters != nil {
		suppress(d.deadLetters, suppression{id: "AwsSolutions-SQS3", reason: reasonDeadLetters})
	}
	if d.cluster.lookup != nil {
		if provider := d.stack.Node().TryFindChild(jsii.String(awsCustomResourceID)); provider != nil {
			suppress(provider, suppression{id: "AwsSolutions-IAM4", reason: reasonLookupManaged, appliesTo: []string{findingManagedBasic}})
		}
	}
}
