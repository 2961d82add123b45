package nodewright

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseks"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// Tag keys of the cluster's EC2 resources (karpenter-spec 1.5; shared/
// amifamily LaunchTags and RegistrationTags set them).
const (
	tagClusterPrefix  = "kubernetes.io/cluster/"
	tagEKSClusterName = "eks:eks-cluster-name"
	tagNodePool       = "karpenter.sh/nodepool"
	tagNodeClaim      = "karpenter.sh/nodeclaim"
	tagName           = "Name"
	tagOwnedValue     = "owned"
	// tagOwner is nodewright's ownership mark, <tagOwner>=<cluster name>
	// (shared/apis/v1 TagKeyOwner), which Karpenter never writes.
	tagOwner           = "nodewright.dev/owner"
	eksNodeAccessEntry = "EC2_LINUX"
	// eksWindowsNodeAccessEntry is the access entry type of Windows
	// nodes' roles (EKS: EC2_WINDOWS adds the Windows node groups).
	eksWindowsNodeAccessEntry = "EC2_WINDOWS"
)

// EC2 actions that create, change or destroy instances and launch
// templates. A test fails if a policy grants one of them on a created
// resource type without a tag condition.
var ec2LaunchActions = []string{"ec2:RunInstances", "ec2:CreateFleet", "ec2:TerminateInstances", "ec2:CreateTags", "ec2:DeleteLaunchTemplate"}

// ec2 builds a regional EC2 ARN pattern for resourceType; account is
// "" (images, snapshots: no account in the ARN), "*" (resources another
// account may share through RAM) or "own".
func ec2ARN(account, resourceType string) string {
	switch account {
	case "own":
		account = *awscdk.Aws_ACCOUNT_ID()
	case "*", "":
	}
	return "arn:" + *awscdk.Aws_PARTITION() + ":ec2:" + *awscdk.Aws_REGION() + ":" + account + ":" + resourceType + "/*"
}

// Resources an instance launch references but does not create: AMIs and
// snapshots (often Amazon's, untaggable by the user), and subnets, security
// groups, capacity reservations and placement groups (possibly shared
// from another account). Karpenter's controller policy grants launches on
// these without a condition (karpenter-spec 4.1, first row): a launch also
// needs the tag-conditioned grants on the resources it creates, so these
// alone launch nothing.
func launchReferencedResources() []*string {
	return *jsii.Strings(
		ec2ARN("", "image"), ec2ARN("", "snapshot"),
		ec2ARN("*", "security-group"), ec2ARN("*", "subnet"),
		ec2ARN("*", "capacity-reservation"), ec2ARN("*", "placement-group"),
	)
}

// launchCreatedResources are what CreateFleet, RunInstances and
// CreateLaunchTemplate create; always in this account.
func launchCreatedResources() []*string {
	return *jsii.Strings(
		ec2ARN("own", "fleet"), ec2ARN("own", "instance"), ec2ARN("own", "volume"),
		ec2ARN("own", "network-interface"), ec2ARN("own", "launch-template"),
		ec2ARN("own", "spot-instances-request"),
	)
}

// requestTagged is the condition that a request tags what it creates as
// the cluster's, in a node pool (karpenter-spec 4.1, third row), and with
// nodewright's ownership mark: nothing nodewright creates lacks it.
func requestTagged(cluster string) map[string]any {
	return map[string]any{
		"StringEquals": map[string]any{
			"aws:RequestTag/" + tagClusterPrefix + cluster: tagOwnedValue,
			"aws:RequestTag/" + tagEKSClusterName:          cluster,
			"aws:RequestTag/" + tagOwner:                   cluster,
		},
		"StringLike": map[string]any{"aws:RequestTag/" + tagNodePool: "*"},
	}
}

// resourceTagged is the condition that an existing resource is the
// cluster's and in a node pool (karpenter-spec 4.1, rows 2, 5 and 6).
func resourceTagged(cluster string) map[string]any {
	return map[string]any{
		"StringEquals": map[string]any{"aws:ResourceTag/" + tagClusterPrefix + cluster: tagOwnedValue},
		"StringLike":   map[string]any{"aws:ResourceTag/" + tagNodePool: "*"},
	}
}

// resourceOwned is the condition that an existing resource is one
// nodewright created for the cluster: resourceTagged plus the ownership
// mark. Karpenter's instances and launch templates carry the cluster's tags
// but not the mark, so a grant under this condition cannot touch them.
func resourceOwned(cluster string) map[string]any {
	return merge(resourceTagged(cluster), map[string]any{
		"StringEquals": map[string]any{"aws:ResourceTag/" + tagOwner: cluster},
	})
}

func inRegion() map[string]any {
	return map[string]any{"StringEquals": map[string]any{"aws:RequestedRegion": *awscdk.Aws_REGION()}}
}

func statement(sid string, actions []string, resources []*string, conditions map[string]any) awsiam.PolicyStatement {
	props := &awsiam.PolicyStatementProps{
		Sid:       jsii.String(sid),
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}
	if conditions != nil {
		props.Conditions = &conditions
	}
	return awsiam.NewPolicyStatement(props)
}

// grantStatements turns a function's grants into policy statements,
// following the reference scoping of Karpenter's controller policy
// (karpenter-spec 4.1), restricted to the calls nodewright's code makes.
func grantStatements(d *deployment, g grant) []awsiam.PolicyStatement {
	cluster := d.props.Cluster.Name
	switch g {
	case grantLaunch:
		return []awsiam.PolicyStatement{
			statement("LaunchWithReferencedResources", []string{"ec2:RunInstances", "ec2:CreateFleet"}, launchReferencedResources(), nil),
			statement("LaunchWithClusterLaunchTemplates", []string{"ec2:RunInstances", "ec2:CreateFleet"},
				*jsii.Strings(ec2ARN("own", "launch-template")), resourceOwned(cluster)),
			statement("CreateClusterTaggedResources", []string{"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"},
				launchCreatedResources(), requestTagged(cluster)),
			statement("TagOnCreation", []string{"ec2:CreateTags"}, launchCreatedResources(), merge(requestTagged(cluster), map[string]any{
				"StringEquals": map[string]any{"ec2:CreateAction": []string{"RunInstances", "CreateFleet", "CreateLaunchTemplate"}},
			})),
			statement("FindLaunchTemplates", []string{"ec2:DescribeLaunchTemplates"}, *jsii.Strings("*"), inRegion()),
			statement("PassNodeRole", []string{"iam:PassRole"}, nodeRoleResources(d), passedToEC2()),
		}
	case grantResolve:
		return []awsiam.PolicyStatement{
			statement("ResolveNodeClasses", []string{"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets"},
				*jsii.Strings("*"), inRegion()),
			statement("ReadPublicSSMParameters", []string{"ssm:GetParameter"},
				*jsii.Strings("arn:" + *awscdk.Aws_PARTITION() + ":ssm:" + *awscdk.Aws_REGION() + "::parameter/aws/service/*"), nil),
		}
	case grantListInstances:
		return []awsiam.PolicyStatement{
			statement("ListInstances", []string{"ec2:DescribeInstances"}, *jsii.Strings("*"), inRegion()),
		}
	case grantDescribeInstanceStatus:
		// DescribeInstanceStatus has no resource-level permissions
		// (Service Authorization Reference); Karpenter needs only it for
		// its instance-status poll (karpenter-spec 8.2).
		return []awsiam.PolicyStatement{
			statement("ReadInstanceStatus", []string{"ec2:DescribeInstanceStatus"}, *jsii.Strings("*"), inRegion()),
		}
	case grantReadEC2Data:
		// The gc Lambda is the one refresher of the live EC2 data
		// (functions/gc). These Describe calls and the Price List API have
		// no resource-level permissions (Service Authorization Reference),
		// as in Karpenter's controller policy (karpenter-spec 4.1); the
		// Pricing endpoint is in us-east-1 or ap-south-1, not the stack's
		// region, so GetProducts carries no region condition. With
		// IsolatedVPC the refresh never calls the Pricing API: no grant.
		statements := []awsiam.PolicyStatement{
			statement("ReadEC2Data", []string{"ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes", "ec2:DescribeSpotPriceHistory"},
				*jsii.Strings("*"), inRegion()),
		}
		if !d.props.IsolatedVPC {
			statements = append(statements, statement("ReadPrices", []string{"pricing:GetProducts"}, *jsii.Strings("*"), nil))
		}
		return statements
	case grantTerminate:
		// The drain-and-replace and interruption steps terminate the
		// instance of one NodeClaim record after draining its Node,
		// including nodes adopted from Karpenter, which carry only
		// Karpenter's tags (adoption never retags): Karpenter's own
		// condition (karpenter-spec 4.1, row 5).
		return []awsiam.PolicyStatement{
			statement("TerminateClusterInstances", []string{"ec2:TerminateInstances"}, *jsii.Strings(ec2ARN("own", "instance")), resourceTagged(cluster)),
		}
	case grantTerminateOwned:
		// Garbage collection terminates instances no record may name: only
		// those carrying nodewright's ownership mark, so that it cannot
		// terminate an instance Karpenter (or anyone else) launched.
		return []awsiam.PolicyStatement{
			statement("TerminateOwnedInstances", []string{"ec2:TerminateInstances"}, *jsii.Strings(ec2ARN("own", "instance")), resourceOwned(cluster)),
		}
	case grantTagInstances:
		// Karpenter's AllowScopedResourceTagging: the cluster's instances,
		// only the post-registration keys, and eks:eks-cluster-name only
		// with the cluster's name (karpenter-spec 4.1, 1.5); and only
		// nodewright's own instances (the ownership mark): adopted ones
		// are never retagged.
		return []awsiam.PolicyStatement{
			statement("TagClusterInstances", []string{"ec2:CreateTags"}, *jsii.Strings(ec2ARN("own", "instance")), merge(resourceOwned(cluster), map[string]any{
				"StringEqualsIfExists":      map[string]any{"aws:RequestTag/" + tagEKSClusterName: cluster},
				"ForAllValues:StringEquals": map[string]any{"aws:TagKeys": []string{tagEKSClusterName, tagNodeClaim, tagName}},
			})),
		}
	case grantInstanceProfiles:
		// Karpenter's instance-profile statements (karpenter-spec 4.1),
		// narrowed to nodewright's path for the cluster and its ownership
		// tags: a profile is created only with them, and changed only
		// while it carries them. GetInstanceProfile reads any profile
		// under the path, so one that is not nodewright's is reported on
		// the class rather than denied. AddRoleToInstanceProfile also
		// needs iam:PassRole of the role: the allowed roles only.
		profiles := *jsii.Strings(instanceProfileARN(d))
		return []awsiam.PolicyStatement{
			statement("ReadNodeRoles", []string{"iam:GetRole"}, nodeRoleResources(d), nil),
			statement("PassNodeRoleToProfiles", []string{"iam:PassRole"}, nodeRoleResources(d), passedToEC2()),
			statement("ReadInstanceProfiles", []string{"iam:GetInstanceProfile"}, profiles, nil),
			statement("CreateOwnedInstanceProfiles", []string{"iam:CreateInstanceProfile", "iam:TagInstanceProfile"}, profiles, map[string]any{
				"StringEquals": map[string]any{
					"aws:RequestTag/" + tagClusterPrefix + cluster: tagOwnedValue,
					"aws:RequestTag/" + tagOwner:                   cluster,
				},
			}),
			statement("FillOwnedInstanceProfiles", []string{"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:TagInstanceProfile"}, profiles, profileOwned(cluster)),
		}
	case grantCleanInstanceProfiles:
		profiles := *jsii.Strings(instanceProfileARN(d))
		return []awsiam.PolicyStatement{
			statement("ListInstanceProfiles", []string{"iam:ListInstanceProfiles", "iam:GetInstanceProfile"}, profiles, nil),
			statement("DeleteOwnedInstanceProfiles", []string{"iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"}, profiles, profileOwned(cluster)),
		}
	case grantCleanLaunchTemplates:
		return []awsiam.PolicyStatement{
			statement("ListLaunchTemplates", []string{"ec2:DescribeLaunchTemplates"}, *jsii.Strings("*"), inRegion()),
			statement("DeleteClusterLaunchTemplates", []string{"ec2:DeleteLaunchTemplate"}, *jsii.Strings(ec2ARN("own", "launch-template")), resourceOwned(cluster)),
		}
	}
	return nil
}

// passedToEC2 is PassRole's condition that the role goes to EC2 (an
// instance or instance profile), as Karpenter's (karpenter-spec 4.1).
func passedToEC2() map[string]any {
	return map[string]any{"StringEquals": map[string]any{"iam:PassedToService": []string{"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}}}
}

// profileOwned is the condition that an instance profile carries the
// cluster's tags and nodewright's ownership mark (shared/launch
// InstanceProfileTags).
func profileOwned(cluster string) map[string]any {
	return map[string]any{"StringEquals": map[string]any{
		"aws:ResourceTag/" + tagClusterPrefix + cluster: tagOwnedValue,
		"aws:ResourceTag/" + tagOwner:                   cluster,
	}}
}

// instanceProfileARN covers every instance profile nodewright creates for
// the cluster: the path /nodewright/<region>/<cluster>/ (shared/launch
// InstanceProfilePathPrefix), any class UID below it.
func instanceProfileARN(d *deployment) string {
	return "arn:" + *awscdk.Aws_PARTITION() + ":iam::" + *awscdk.Aws_ACCOUNT_ID() + ":instance-profile/nodewright/" +
		*awscdk.Aws_REGION() + "/" + d.props.Cluster.Name + "/*"
}

// nodeRoleARNs are the allowed node roles by ARN: the deployment's node
// role, then Props.NodeRoles.
func (d *deployment) nodeRoleARNs() []string {
	out := []string{*d.nodeRole.arn}
	for _, r := range d.props.NodeRoles {
		if !slices.Contains(out, r.ARN) {
			out = append(out, r.ARN)
		}
	}
	return out
}

// nodeRoleResources are the allowed node roles as IAM resources:
// nodeRoleARNs and, with Props.NodeRolePathPrefix, every role under it.
func nodeRoleResources(d *deployment) []*string {
	out := jsii.Strings(d.nodeRoleARNs()...)
	if pp := d.props.NodeRolePathPrefix; pp != "" {
		*out = append(*out, jsii.String("arn:"+*awscdk.Aws_PARTITION()+":iam::"+*awscdk.Aws_ACCOUNT_ID()+":role"+pp+"*"))
	}
	return *out
}

// merge combines condition blocks; operators present in both are merged
// key by key.
func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range []map[string]any{a, b} {
		for op, v := range m {
			existing, ok := out[op].(map[string]any)
			if !ok {
				out[op] = v
				continue
			}
			combined := map[string]any{}
			for k, x := range existing {
				combined[k] = x
			}
			for k, x := range v.(map[string]any) {
				combined[k] = x
			}
			out[op] = combined
		}
	}
	return out
}

// applyGrants adds every grant of spec to its function's role.
func applyGrants(d *deployment, f *builtFunction) {
	for _, g := range f.spec.grants {
		switch g {
		case grantTable:
			if access, ok := d.tableAccess[f.spec.name]; ok {
				for _, st := range ownKeyStatements(d, access) {
					f.role.AddToPrincipalPolicy(st)
				}
				continue
			}
			grantTableItems(d, f.role)
		case grantSendProvisioning:
			d.queues[queueProvisioning].queue.GrantSendMessages(f.role)
		default:
			for _, st := range grantStatements(d, g) {
				f.role.AddToPrincipalPolicy(st)
			}
		}
	}
}

// tableItemActions are item-level reads and writes, with batches and the
// condition checks of transactions: no Scan, no stream reads, no table
// administration (the stack owns the table).
var tableItemActions = []string{
	"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query",
	"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem",
	"dynamodb:ConditionCheckItem",
}

// tableARNs are the table and each of its indexes by name: no wildcard.
func tableARNs(d *deployment) *[]*string {
	arns := []*string{d.table.TableArn()}
	for _, ix := range d.tableIndexes {
		arns = append(arns, jsii.String(*d.table.TableArn()+"/index/"+ix))
	}
	return &arns
}

// grantTableItems lets grantee read and write the table's items and query
// its indexes.
func grantTableItems(d *deployment, grantee awsiam.IGrantable) {
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee:      grantee,
		Actions:      jsii.Strings(tableItemActions...),
		ResourceArns: tableARNs(d),
	})
}

// ownKeyStatements limit a role to the partition keys its function uses
// (schema.json's access, from ddbstore.Schema): GetItem and Query of the
// keys it reads or writes, PutItem, UpdateItem and DeleteItem of the keys
// it writes (also as the items of a TransactWriteItems: a NodeClaim write
// and its generation bump, an UpdateItem of an item of the same key),
// each conditioned on dynamodb:LeadingKeys (ForAllValues:StringLike, so a
// request naming any other key is denied), on the table; and Query of each
// index it names, on that index only, conditioned on its cluster's keys
// ("<cluster>#*": an index's partition key is "<cluster>#<instance id>" or
// "<cluster>#<nodepool>", so LeadingKeys can narrow it no further). The
// intake, the internet-facing function, is so kept from NodeClaims, leases
// and budgets, and the interruption functions from NodeClaim writes.
func ownKeyStatements(d *deployment, a tableAccess) []awsiam.PolicyStatement {
	keys := func(patterns ...[]string) map[string]any {
		var out []string
		for _, ps := range patterns {
			for _, p := range ps {
				// A key both read and written (a payload stored and read
				// back) is listed once.
				if k := d.props.Cluster.Name + "#" + p; !slices.Contains(out, k) {
					out = append(out, k)
				}
			}
		}
		return map[string]any{"ForAllValues:StringLike": map[string]any{"dynamodb:LeadingKeys": out}}
	}
	table := []*string{d.table.TableArn()}
	out := []awsiam.PolicyStatement{
		statement("TableReadOwnKeys", []string{"dynamodb:GetItem", "dynamodb:Query"}, table, keys(a.Read, a.Write)),
		statement("TableWriteOwnKeys", []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}, table, keys(a.Write)),
	}
	if len(a.Indexes) > 0 {
		var indexes []*string
		for _, ix := range a.Indexes {
			indexes = append(indexes, jsii.String(*d.table.TableArn()+"/index/"+ix))
		}
		out = append(out, statement("IndexQueryOwnCluster", []string{"dynamodb:Query"}, indexes, keys([]string{"*"})))
	}
	return out
}

// nodeRole is the role nodes run with and its instance profile.
type nodeRole struct {
	name *string
	arn  *string
}

// newNodeRole imports Props.NodeRoleName, or creates the role with the
// policies EKS nodes need (the four AWS managed policies of Karpenter's
// reference node role) and its EC2_LINUX access entry so its nodes can
// join; and gives each of Props.NodeRoles its access entry, EC2_WINDOWS
// for a Windows role, else EC2_LINUX. The instance profiles of these
// roles are the runtime's: one per EC2NodeClass (shared/aws/iamprofile).
func newNodeRole(d *deployment) nodeRole {
	var r nodeRole
	if name := d.props.NodeRoleName; name != "" {
		role := awsiam.Role_FromRoleName(d.scope, jsii.String("NodeRole"), jsii.String(name), nil)
		r = nodeRole{name: role.RoleName(), arn: role.RoleArn()}
	} else {
		var managed []awsiam.IManagedPolicy
		for _, p := range []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore"} {
			managed = append(managed, awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String(p)))
		}
		role := awsiam.NewRole(d.scope, jsii.String("NodeRole"), &awsiam.RoleProps{
			AssumedBy:       awsiam.NewServicePrincipal(jsii.String("ec2.amazonaws.com"), nil),
			Description:     jsii.String("nodewright nodes of cluster " + d.props.Cluster.Name),
			ManagedPolicies: &managed,
		})
		awseks.NewCfnAccessEntry(d.scope, jsii.String("NodeAccessEntry"), &awseks.CfnAccessEntryProps{
			ClusterName:  jsii.String(d.props.Cluster.Name),
			PrincipalArn: role.RoleArn(),
			Type:         jsii.String(eksNodeAccessEntry),
		})
		r = nodeRole{name: role.RoleName(), arn: role.RoleArn()}
	}
	for i, nr := range d.props.NodeRoles {
		typ := eksNodeAccessEntry
		if nr.Windows {
			typ = eksWindowsNodeAccessEntry
		}
		awseks.NewCfnAccessEntry(d.scope, jsii.String(fmt.Sprintf("NodeRole%dAccessEntry", i+1)), &awseks.CfnAccessEntryProps{
			ClusterName:  jsii.String(d.props.Cluster.Name),
			PrincipalArn: jsii.String(nr.ARN),
			Type:         jsii.String(typ),
		})
	}
	return r
}

// newForwarderRole is the in-cluster forwarder's role: through EKS Pod
// Identity (an association for the nodewright/nodewright-forwarder
// ServiceAccount, with a trust policy that checks the session tags Pod
// Identity sets) or, with Props.ForwarderOIDCProviderARN, through IRSA.
// It may only invoke the intake API (grantForwarder).
func newForwarderRole(d *deployment) awsiam.Role {
	var principal awsiam.IPrincipal
	if oidc := d.props.ForwarderOIDCProviderARN; oidc != "" {
		issuer := oidc[strings.Index(oidc, ":oidc-provider/")+len(":oidc-provider/"):]
		principal = awsiam.NewFederatedPrincipal(jsii.String(oidc), &map[string]any{
			"StringEquals": map[string]any{
				issuer + ":sub": "system:serviceaccount:" + forwarderNamespace + ":" + forwarderServiceAccount,
				issuer + ":aud": "sts.amazonaws.com",
			},
		}, jsii.String("sts:AssumeRoleWithWebIdentity"))
	} else {
		principal = awsiam.NewSessionTagsPrincipal(awsiam.NewPrincipalWithConditions(
			awsiam.NewServicePrincipal(jsii.String("pods.eks.amazonaws.com"), nil),
			&map[string]any{"StringEquals": map[string]any{
				"aws:RequestTag/eks-cluster-name":           d.props.Cluster.Name,
				"aws:RequestTag/kubernetes-namespace":       forwarderNamespace,
				"aws:RequestTag/kubernetes-service-account": forwarderServiceAccount,
			}}))
	}
	role := awsiam.NewRole(d.scope, jsii.String("ForwarderRole"), &awsiam.RoleProps{
		AssumedBy:   principal,
		Description: jsii.String("nodewright forwarder in cluster " + d.props.Cluster.Name + ": invokes the intake API only"),
	})
	if d.props.ForwarderOIDCProviderARN == "" {
		awseks.NewCfnPodIdentityAssociation(d.scope, jsii.String("ForwarderPodIdentity"), &awseks.CfnPodIdentityAssociationProps{
			ClusterName:    jsii.String(d.props.Cluster.Name),
			Namespace:      jsii.String(forwarderNamespace),
			ServiceAccount: jsii.String(forwarderServiceAccount),
			RoleArn:        role.RoleArn(),
		})
	}
	return role
}

// grantForwarder lets the forwarder's role invoke the API's /v1 routes on
// its deployed stage, and nothing else.
func grantForwarder(d *deployment) {
	d.forwarder.AddToPrincipalPolicy(statement("InvokeIntakeAPI", []string{"execute-api:Invoke"},
		[]*string{d.api.ArnForExecuteApi(jsii.String("*"), jsii.String("/v1/*"), d.api.DeploymentStage().StageName())}, nil))
}
