package nodewright

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// TestNag runs cdk-nag's AwsSolutions pack over deployments that together
// create every resource the construct can: every finding must be fixed or
// suppressed with a reason (nag.go).
func TestNag(t *testing.T) {
	f := newFixture(t)
	f.addStateMachine(t, "sample", "testdata/sample.asl.json")
	tests := []struct {
		name  string
		props func(Props) Props
		env   *awscdk.Environment
	}{
		{
			name:  "should pass with the cluster looked up, Pod Identity and a created node role",
			props: func(p Props) Props { return p },
			env:   &awscdk.Environment{Account: jsii.String("111122223333"), Region: jsii.String("us-east-1")},
		},
		{
			name:  "should pass in an environment-agnostic stack (synth without credentials)",
			props: func(p Props) Props { return p },
		},
		{name: "should pass with the cluster given, IRSA, an existing node role, a VPC and alarms to SNS", props: func(p Props) Props {
			p.Cluster = Cluster{Name: "prod-east", Endpoint: "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com", CAData: "Y2E=", KubernetesVersion: "1.33",
				ServiceCIDR: "172.20.0.0/16", SecurityGroupID: "sg-0123456789abcdef0"}
			p.ForwarderOIDCProviderARN = "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
			p.NodeRoleName = "KarpenterNodeRole-prod-east"
			p.Network = &Network{SubnetIDs: []string{"subnet-0123456789abcdef0", "subnet-0fedcba9876543210"}, VPCID: "vpc-0123456789abcdef0"}
			p.AlarmTopicARN = "arn:aws:sns:us-east-1:111122223333:oncall"
			return p
		}, env: &awscdk.Environment{Account: jsii.String("111122223333"), Region: jsii.String("us-east-1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stack, err := synthIn(t, tt.props(baseProps(f)), tt.env)
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			awscdk.Aspects_Of(stack).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
			annotations := assertions.Annotations_FromStack(stack)
			pattern := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
			for _, m := range *annotations.FindError(jsii.String("*"), pattern) {
				t.Errorf("unsuppressed error at %s: %v", *m.Id, m.Entry.Data)
			}
			for _, m := range *annotations.FindWarning(jsii.String("*"), pattern) {
				t.Errorf("unsuppressed warning at %s: %v", *m.Id, m.Entry.Data)
			}
		})
	}
}
