package nodewright

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/google/go-cmp/cmp"
)

// TestVariants checks what each optional prop changes in the template.
func TestVariants(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name  string
		props func(Props) Props
		check func(t *testing.T, tmpl assertions.Template, c cfnTemplate)
	}{
		{
			name: "should take the cluster's endpoint, CA and version from props without a deploy-time lookup",
			props: func(p Props) Props {
				p.Cluster = Cluster{Name: "prod-east", Endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com", CAData: "Y2E=", KubernetesVersion: "1.33", DNS: "172.20.0.10"}
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				countIs(t, tmpl, "Custom::AWS", 0)
				hasProps(t, tmpl, "AWS::Lambda::Function", map[string]any{
					"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
						"CLUSTER_ENDPOINT":   "https://ABC.gr7.us-east-1.eks.amazonaws.com",
						"CLUSTER_CA_DATA":    "Y2E=",
						"KUBERNETES_VERSION": "1.33",
						"CLUSTER_DNS":        "172.20.0.10",
						"SERVICE_CIDR":       assertions.Match_Absent(),
					})},
				})
			},
		},
		{
			name: "should look up only what props leave out",
			props: func(p Props) Props {
				p.Cluster = Cluster{Name: "prod-east", KubernetesVersion: "1.34"}
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				countIs(t, tmpl, "Custom::AWS", 1)
				hasProps(t, tmpl, "AWS::Lambda::Function", map[string]any{
					"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
						"KUBERNETES_VERSION": "1.34",
						"CLUSTER_ENDPOINT":   map[string]any{"Fn::GetAtt": []any{"NodewrightClusterLookupE7E77144", "cluster.endpoint"}},
					})},
				})
			},
		},
		{
			name: "should place only the functions that reach the cluster in the VPC, with an HTTPS-only security group",
			props: func(p Props) Props {
				p.Network = &Network{SubnetIDs: []string{"subnet-0123456789abcdef0"}, VPCID: "vpc-0123456789abcdef0"}
				p.Cluster.SecurityGroupID = "sg-0123456789abcdef0"
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				var inVPC []string
				for _, r := range c.ofType("AWS::Lambda::Function") {
					if r.Properties["VpcConfig"] != nil {
						inVPC = append(inVPC, render(r.Properties["Description"]))
					}
				}
				slices.Sort(inVPC)
				var want []string
				for _, spec := range functions {
					if spec.kube != nil {
						want = append(want, "nodewright "+spec.description)
					}
				}
				slices.Sort(want)
				if diff := cmp.Diff(want, inVPC); diff != "" {
					t.Errorf("functions in the VPC mismatch (-want +got):\n%s", diff)
				}
				hasProps(t, tmpl, "AWS::EC2::SecurityGroup", map[string]any{
					"VpcId": "vpc-0123456789abcdef0",
					"SecurityGroupEgress": []any{assertions.Match_ObjectLike(&map[string]any{
						"CidrIp": "0.0.0.0/0", "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443,
					})},
				})
				hasProps(t, tmpl, "AWS::EC2::SecurityGroupIngress", map[string]any{
					"GroupId": "sg-0123456789abcdef0", "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp",
					"SourceSecurityGroupId": assertions.Match_AnyValue(),
				})
			},
		},
		{
			name: "should use given security groups and create none",
			props: func(p Props) Props {
				p.Network = &Network{SubnetIDs: []string{"subnet-0123456789abcdef0"}, SecurityGroupIDs: []string{"sg-0fedcba9876543210"}}
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				countIs(t, tmpl, "AWS::EC2::SecurityGroup", 0)
				hasProps(t, tmpl, "AWS::Lambda::Function", map[string]any{
					"VpcConfig": map[string]any{"SubnetIds": []any{"subnet-0123456789abcdef0"}, "SecurityGroupIds": []any{"sg-0fedcba9876543210"}},
				})
			},
		},
		{
			name: "should trust the cluster's OIDC provider for the forwarder's ServiceAccount with IRSA, and create no pod identity association",
			props: func(p Props) Props {
				p.ForwarderOIDCProviderARN = "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE"
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				countIs(t, tmpl, "AWS::EKS::PodIdentityAssociation", 0)
				hasProps(t, tmpl, "AWS::IAM::Role", map[string]any{
					"AssumeRolePolicyDocument": map[string]any{"Statement": []any{map[string]any{
						"Action":    "sts:AssumeRoleWithWebIdentity",
						"Effect":    "Allow",
						"Principal": map[string]any{"Federated": "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE"},
						"Condition": map[string]any{"StringEquals": map[string]any{
							"oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE:sub": "system:serviceaccount:nodewright:nodewright-forwarder",
							"oidc.eks.us-east-1.amazonaws.com/id/EXAMPLE:aud": "sts.amazonaws.com",
						}},
					}}, "Version": "2012-10-17"},
				})
			},
		},
		{
			name: "should use an existing node role: pass only it, create no role or node access entry",
			props: func(p Props) Props {
				p.NodeRoleName = "KarpenterNodeRole-prod-east"
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				for _, r := range c.ofType("AWS::EKS::AccessEntry") {
					if r.Properties["Type"] == eksNodeAccessEntry {
						t.Errorf("created a node access entry for an existing role: %v", r.Properties)
					}
				}
				for _, r := range c.ofType("AWS::IAM::Role") {
					if strings.Contains(render(r.Properties["AssumeRolePolicyDocument"]), "ec2.amazonaws.com") {
						t.Errorf("created a node role: %v", r.Properties)
					}
				}
				found := false
				for _, st := range c.identityStatements() {
					if slices.Contains(st.actions, "iam:PassRole") {
						found = true
						if diff := cmp.Diff([]string{"arn:<AWS::Partition>:iam::111122223333:role/KarpenterNodeRole-prod-east"}, st.resources); diff != "" {
							t.Errorf("iam:PassRole resources mismatch (-want +got):\n%s", diff)
						}
					}
				}
				if !found {
					t.Error("no iam:PassRole grant")
				}
			},
		},
		{
			name: "should allow the listed node roles and path: pass exactly them, give each an access entry of its type, and tell the Lambdas",
			props: func(p Props) Props {
				p.NodeRoleName = "KarpenterNodeRole-prod-east"
				p.NodeRoles = []NodeRole{
					{ARN: "arn:aws:iam::111122223333:role/team/GPUNodes"},
					{ARN: "arn:aws:iam::111122223333:role/WindowsNodes", Windows: true},
				}
				p.NodeRolePathPrefix = "/nodes/"
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				wantRoles := []string{
					"arn:<AWS::Partition>:iam::111122223333:role/KarpenterNodeRole-prod-east",
					"arn:aws:iam::111122223333:role/team/GPUNodes",
					"arn:aws:iam::111122223333:role/WindowsNodes",
					"arn:<AWS::Partition>:iam::<AWS::AccountId>:role/nodes/*",
				}
				found := 0
				for _, st := range c.identityStatements() {
					if slices.Contains(st.actions, "iam:PassRole") || slices.Contains(st.actions, "iam:GetRole") {
						found++
						if diff := cmp.Diff(wantRoles, st.resources); diff != "" {
							t.Errorf("%v: role resources mismatch (-want +got):\n%s", st, diff)
						}
					}
				}
				if found == 0 {
					t.Error("no iam:PassRole or iam:GetRole grant")
				}
				var entries []string
				for _, r := range c.ofType("AWS::EKS::AccessEntry") {
					if typ := render(r.Properties["Type"]); typ != "STANDARD" {
						entries = append(entries, typ+" "+render(r.Properties["PrincipalArn"]))
					}
				}
				slices.Sort(entries)
				if diff := cmp.Diff([]string{"EC2_LINUX arn:aws:iam::111122223333:role/team/GPUNodes", "EC2_WINDOWS arn:aws:iam::111122223333:role/WindowsNodes"}, entries); diff != "" {
					t.Errorf("node access entries mismatch (-want +got):\n%s", diff)
				}
				hasProps(t, tmpl, "AWS::Lambda::Function", map[string]any{
					"Description": "nodewright " + specByName(t, "provisioner").description,
					"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
						"NODE_ROLE_PATH_PREFIX": "/nodes/",
						"NODE_ROLE_ARNS": map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"},
							":iam::111122223333:role/KarpenterNodeRole-prod-east,arn:aws:iam::111122223333:role/team/GPUNodes,arn:aws:iam::111122223333:role/WindowsNodes"}}},
					})},
				})
			},
		},
		{
			name: "should deploy no interruption function, queue or rule with interruption off",
			props: func(p Props) Props {
				p.Interruption = false
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				countIs(t, tmpl, "AWS::Events::Rule", 0)
				// The provisioning queue and DLQ, and the standard DLQ of the
				// schedules.
				countIs(t, tmpl, "AWS::SQS::Queue", 3)
				for _, r := range c.ofType("AWS::Lambda::Function") {
					if strings.HasPrefix(render(r.Properties["Description"]), "nodewright interruption") {
						t.Error("deployed the interruption function")
					}
				}
			},
		},
		{
			name: "should reserve no concurrency when told not to",
			props: func(p Props) Props {
				p.ReservedConcurrency = false
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				for id, r := range c.ofType("AWS::Lambda::Function") {
					if r.Properties["ReservedConcurrentExecutions"] != nil {
						t.Errorf("function %s reserves concurrency", id)
					}
				}
			},
		},
		{
			name: "should pass feature gates to the provisioner in Karpenter's syntax, sorted",
			props: func(p Props) Props {
				p.FeatureGates = map[string]bool{"SpotToSpotConsolidation": true, "NodeRepair": false}
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				hasProps(t, tmpl, "AWS::Lambda::Function", map[string]any{
					"Description": "nodewright " + specByName(t, "provisioner").description,
					"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
						"FEATURE_GATES": "NodeRepair=false,SpotToSpotConsolidation=true",
					})},
				})
			},
		},
		{
			name: "should notify the alarm topic from every alarm",
			props: func(p Props) Props {
				p.AlarmTopicARN = "arn:aws:sns:us-east-1:111122223333:oncall"
				return p
			},
			check: func(t *testing.T, tmpl assertions.Template, c cfnTemplate) {
				for id, r := range c.ofType("AWS::CloudWatch::Alarm") {
					if diff := cmp.Diff([]string{"arn:aws:sns:us-east-1:111122223333:oncall"}, strs(r.Properties["AlarmActions"])); diff != "" {
						t.Errorf("alarm %s actions mismatch (-want +got):\n%s", id, diff)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, c := mustTemplate(t, tt.props(baseProps(f)))
			tt.check(t, tmpl, c)
		})
	}
}

// TestNewErrors checks that New refuses what it cannot deploy, naming it.
func TestNewErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, f fixture, p *Props)
		want  []string // substrings of the error
	}{
		{
			name:  "should refuse a cluster name EKS would refuse",
			setup: func(t *testing.T, f fixture, p *Props) { p.Cluster.Name = "-bad name" },
			want:  []string{`cluster name "-bad name"`},
		},
		{
			name: "should report every invalid prop at once",
			setup: func(t *testing.T, f fixture, p *Props) {
				p.LogRetentionDays = 13
				p.LogLevel = "verbose"
				p.FeatureGates = map[string]bool{"Teleport": true}
				p.Cluster.Endpoint = "http://plain"
			},
			want: []string{"log retention 13 days", `log level "verbose"`, `feature gate "Teleport"`, `cluster endpoint "http://plain"`},
		},
		{
			name: "should refuse a network without subnets, or without a VPC to create a security group in",
			setup: func(t *testing.T, f fixture, p *Props) {
				p.Network = &Network{}
			},
			want: []string{"network: at least one subnet ID is required", "network: a VPC ID is required"},
		},
		{
			name: "should refuse a node role that is not a role ARN, listed twice, or a path prefix allowing every role",
			setup: func(t *testing.T, f fixture, p *Props) {
				p.NodeRoles = []NodeRole{{ARN: "GPUNodes"}, {ARN: "arn:aws:iam::111122223333:role/A"}, {ARN: "arn:aws:iam::111122223333:role/A"}}
				p.NodeRolePathPrefix = "/"
			},
			want: []string{`node roles[0] "GPUNodes": not an IAM role ARN`, `node roles[2] "arn:aws:iam::111122223333:role/A": listed twice`, `node role path prefix "/"`},
		},
		{
			name: "should refuse a cluster security group without a network",
			setup: func(t *testing.T, f fixture, p *Props) {
				p.Cluster.SecurityGroupID = "sg-0123456789abcdef0"
			},
			want: []string{"only meaningful with a network"},
		},
		{
			name: "should fail, naming the file, when a function has no bootstrap",
			setup: func(t *testing.T, f fixture, p *Props) {
				if err := os.Remove(filepath.Join(f.dir, "dist", "gc", "bootstrap")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"function gc:", filepath.Join("dist", "gc", "bootstrap"), "make build"},
		},
		{
			name: "should fail when a function starts a state machine that has no file",
			setup: func(t *testing.T, f fixture, p *Props) {
				if err := os.Remove(filepath.Join(f.dir, "statemachines", "interruption"+aslSuffix)); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{`function interruption starts state machine "interruption" (STATE_MACHINE_ARN): no statemachines/interruption.asl.json`},
		},
		{
			name: "should fail, listing what is available, when a placeholder has no substitution",
			setup: func(t *testing.T, f fixture, p *Props) {
				f.writeFile(t, filepath.Join("statemachines", "odd"+aslSuffix),
					`{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"${DrainFunctionArn}","Parameters":{"q":"${Nope}","t":"${TableName}"},"End":true}}}`)
			},
			want: []string{"odd.asl.json: no substitution for ${DrainFunctionArn}, ${Nope}", "available: ClusterName, ", "GcFunctionArn", "TableName"},
		},
		{
			name: "should refuse a state machine file that is not ASL",
			setup: func(t *testing.T, f fixture, p *Props) {
				f.writeFile(t, filepath.Join("statemachines", "broken"+aslSuffix), `{"StartAt": "A", "States": {`)
			},
			want: []string{"broken.asl.json"},
		},
		{
			name: "should refuse a table schema with a field the construct does not know",
			setup: func(t *testing.T, f fixture, p *Props) {
				f.writeFile(t, "schema.json", `{"partitionKey":"pk","billingMode":"PAY_PER_REQUEST","streams":"NEW_IMAGE"}`)
			},
			want: []string{"table schema", `unknown field "streams"`},
		},
		{
			name: "should refuse provisioned billing",
			setup: func(t *testing.T, f fixture, p *Props) {
				f.writeFile(t, "schema.json", `{"partitionKey":"pk","billingMode":"PROVISIONED"}`)
			},
			want: []string{`billingMode "PROVISIONED"`},
		},
		{
			name: "should refuse a missing state machine directory",
			setup: func(t *testing.T, f fixture, p *Props) {
				p.Assets.StateMachineDir = filepath.Join(f.dir, "nowhere")
			},
			want: []string{"state machines:", "nowhere"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			p := baseProps(f)
			tt.setup(t, f, &p)
			_, err := synth(t, p)
			if err == nil {
				t.Fatal("New() error = nil")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
