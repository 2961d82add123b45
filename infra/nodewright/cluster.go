package nodewright

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseks"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/jsii-runtime-go"
)

// clusterInfo is what the Lambdas need to know about the cluster. Values
// the props do not give come from a deploy-time eks:DescribeCluster.
type clusterInfo struct {
	name        *string
	arn         *string
	endpoint    *string
	caData      *string
	version     *string
	serviceCIDR *string
	// lookup is the DescribeCluster call, nil when props gave everything.
	lookup customresources.AwsCustomResource
}

// newClusterInfo takes the endpoint, CA and version from props, and
// whatever is missing from one eks:DescribeCluster at deploy time (the
// call runs again only when its parameters change: after a control-plane
// upgrade, pass the new version in props or redeploy with
// kubernetesVersion set).
func newClusterInfo(d *deployment) clusterInfo {
	c := d.props.Cluster
	info := clusterInfo{
		name: jsii.String(c.Name),
		arn: d.stack.FormatArn(&awscdk.ArnComponents{
			Service:      jsii.String("eks"),
			Resource:     jsii.String("cluster"),
			ResourceName: jsii.String(c.Name),
			ArnFormat:    awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		}),
	}
	given := func(v string) *string {
		if v == "" {
			return nil
		}
		return jsii.String(v)
	}
	info.endpoint, info.caData, info.version, info.serviceCIDR = given(c.Endpoint), given(c.CAData), given(c.KubernetesVersion), given(c.ServiceCIDR)
	if info.endpoint != nil && info.caData != nil && info.version != nil {
		return info
	}
	const (
		pathEndpoint = "cluster.endpoint"
		pathCA       = "cluster.certificateAuthority.data"
		pathVersion  = "cluster.version"
		pathCIDR     = "cluster.kubernetesNetworkConfig.serviceIpv4Cidr"
	)
	call := &customresources.AwsSdkCall{
		Service:            jsii.String("EKS"),
		Action:             jsii.String("describeCluster"),
		Parameters:         map[string]any{"name": c.Name},
		PhysicalResourceId: customresources.PhysicalResourceId_Of(jsii.String(c.Name)),
		OutputPaths:        jsii.Strings(pathEndpoint, pathCA, pathVersion, pathCIDR),
	}
	lg := awslogs.NewLogGroup(d.scope, jsii.String("ClusterLookupLogs"), &awslogs.LogGroupProps{
		Retention:     retention(d.props.LogRetentionDays),
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	info.lookup = customresources.NewAwsCustomResource(d.scope, jsii.String("ClusterLookup"), &customresources.AwsCustomResourceProps{
		OnCreate:            call,
		OnUpdate:            call,
		Policy:              customresources.AwsCustomResourcePolicy_FromSdkCalls(&customresources.SdkCallsPolicyOptions{Resources: &[]*string{info.arn}}),
		InstallLatestAwsSdk: jsii.Bool(false),
		LogGroup:            lg,
	})
	field := func(have *string, path string) *string {
		if have != nil {
			return have
		}
		return info.lookup.GetResponseField(jsii.String(path))
	}
	info.endpoint = field(info.endpoint, pathEndpoint)
	info.caData = field(info.caData, pathCA)
	info.version = field(info.version, pathVersion)
	info.serviceCIDR = field(info.serviceCIDR, pathCIDR)
	return info
}

// placeInVPC attaches fn to Props.Network's subnets and security groups
// (creating one that allows only outbound HTTPS when none is given), and
// opens the cluster security group to them on 443 when it is known.
func placeInVPC(d *deployment, fn awslambda.Function) {
	n := d.props.Network
	sgs := jsii.Strings(n.SecurityGroupIDs...)
	if len(n.SecurityGroupIDs) == 0 {
		sgs = &[]*string{lambdaSecurityGroup(d)}
	}
	cfn := fn.Node().DefaultChild().(awslambda.CfnFunction)
	cfn.AddPropertyOverride(jsii.String("VpcConfig"), map[string]any{
		"SubnetIds":        n.SubnetIDs,
		"SecurityGroupIds": sgs,
	})
}

// lambdaSecurityGroup is created once, on first use.
func lambdaSecurityGroup(d *deployment) *string {
	if existing := d.scope.Node().TryFindChild(jsii.String("LambdaSecurityGroup")); existing != nil {
		return existing.(awsec2.CfnSecurityGroup).AttrGroupId()
	}
	sg := awsec2.NewCfnSecurityGroup(d.scope, jsii.String("LambdaSecurityGroup"), &awsec2.CfnSecurityGroupProps{
		GroupDescription: jsii.String("nodewright Lambdas: outbound HTTPS only (EKS endpoint, AWS APIs)"),
		VpcId:            jsii.String(d.props.Network.VPCID),
		SecurityGroupEgress: &[]any{&awsec2.CfnSecurityGroup_EgressProperty{
			IpProtocol:  jsii.String("tcp"),
			FromPort:    jsii.Number(443),
			ToPort:      jsii.Number(443),
			CidrIp:      jsii.String("0.0.0.0/0"),
			Description: jsii.String("HTTPS to the EKS endpoint and AWS APIs"),
		}},
	})
	if cluster := d.props.Cluster.SecurityGroupID; cluster != "" {
		awsec2.NewCfnSecurityGroupIngress(d.scope, jsii.String("ClusterIngressFromLambdas"), &awsec2.CfnSecurityGroupIngressProps{
			GroupId:               jsii.String(cluster),
			IpProtocol:            jsii.String("tcp"),
			FromPort:              jsii.Number(443),
			ToPort:                jsii.Number(443),
			SourceSecurityGroupId: sg.AttrGroupId(),
			Description:           jsii.String("nodewright Lambdas to the Kubernetes API"),
		})
	}
	return sg.AttrGroupId()
}

// vpcAccessStatements let the Lambda service manage the function's network
// interfaces. EC2's Describe calls and CreateNetworkInterface's validation
// take no resource-level scoping, hence the wildcard (the same actions as
// AWSLambdaVPCAccessExecutionRole).
func vpcAccessStatements() []awsiam.PolicyStatement {
	return []awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("ManageVpcNetworkInterfaces"),
		Actions: jsii.Strings("ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
			"ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"),
		Resources: jsii.Strings("*"),
	})}
}

// newAccessEntries gives each function that calls the Kubernetes API an
// EKS access entry in its own Kubernetes group, and no access policy: the
// ClusterRoles of infra/kube/rbac.yaml, bound to those groups, are all it
// may do. The cluster's authentication mode must include API.
func newAccessEntries(d *deployment, specs []functionSpec) {
	for _, spec := range specs {
		if spec.kube == nil {
			continue
		}
		f := d.functions[spec.name]
		awseks.NewCfnAccessEntry(d.scope, jsii.String(camel(spec.name)+"AccessEntry"), &awseks.CfnAccessEntryProps{
			ClusterName:      d.cluster.name,
			PrincipalArn:     f.role.RoleArn(),
			Type:             jsii.String("STANDARD"),
			KubernetesGroups: jsii.Strings(spec.kube.group),
		})
	}
}
