package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/infra/nodewright"
)

// repo is a directory with a cdk.json and an infra/ below it, as a clone.
func repo(t *testing.T) (root, infra string) {
	t.Helper()
	root = t.TempDir()
	infra = filepath.Join(root, "infra")
	if err := os.MkdirAll(infra, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "cdk.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, infra
}

func contextOf(m map[string]any) lookup { return func(k string) any { return m[k] } }

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfig(t *testing.T) {
	root, infra := repo(t)
	assets := nodewright.Assets{
		DistDir:         filepath.Join(root, "dist"),
		StateMachineDir: filepath.Join(root, "statemachines"),
		TableSchema:     filepath.Join(root, "shared", "aws", "ddbstore", "schema.json"),
	}
	defaults := func(name string) nodewright.Props {
		return nodewright.Props{
			Cluster:             nodewright.Cluster{Name: name},
			Assets:              assets,
			Interruption:        true,
			LogRetentionDays:    30,
			LogLevel:            "info",
			ReservedConcurrency: true,
		}
	}
	tests := []struct {
		name string
		ctx  map[string]any
		env  map[string]string
		dir  string
		want config
	}{
		{
			name: "should need only the cluster name and take Karpenter-like defaults",
			ctx:  map[string]any{"clusterName": "prod-east"},
			dir:  infra,
			want: config{stackName: "nodewright-prod-east", props: defaults("prod-east")},
		},
		{
			name: "should deploy to the CLI's account and region",
			ctx:  map[string]any{"clusterName": "prod-east"},
			env:  map[string]string{"CDK_DEFAULT_ACCOUNT": "111122223333", "CDK_DEFAULT_REGION": "eu-west-1"},
			dir:  root,
			want: config{stackName: "nodewright-prod-east", account: "111122223333", region: "eu-west-1", props: defaults("prod-east")},
		},
		{
			name: "should take the cluster name, account and region from the cluster ARN",
			ctx:  map[string]any{"clusterArn": "arn:aws:eks:us-west-2:444455556666:cluster/blue"},
			env:  map[string]string{"CDK_DEFAULT_ACCOUNT": "111122223333", "CDK_DEFAULT_REGION": "eu-west-1"},
			dir:  infra,
			want: config{stackName: "nodewright-blue", account: "444455556666", region: "us-west-2", props: defaults("blue")},
		},
		{
			name: "should read every setting from -c strings",
			ctx: map[string]any{
				"clusterName": "prod-east", "clusterEndpoint": "https://X.gr7.us-east-1.eks.amazonaws.com", "clusterCaData": "Y2E=",
				"kubernetesVersion": "1.33", "serviceCidr": "172.20.0.0/16", "clusterDns": "172.20.0.10",
				"clusterSecurityGroupId": "sg-1", "vpcId": "vpc-1", "subnetIds": "subnet-1, subnet-2", "securityGroupIds": "",
				"interruption": "false", "featureGates": "SpotToSpotConsolidation=true,NodeRepair=false", "logRetentionDays": "90",
				"logLevel": "debug", "nodeRoleName": "KarpenterNodeRole-prod-east", "forwarderOidcProviderArn": "arn:aws:iam::1:oidc-provider/x",
				"nodeRoles": "arn:aws:iam::1:role/GPU", "windowsNodeRoles": "arn:aws:iam::1:role/Win", "nodeRolePathPrefix": "/nodes/",
				"reservedConcurrency": "false", "alarmTopicArn": "arn:aws:sns:us-east-1:1:oncall", "stackName": "autoscaler",
				"isolatedVPC": "true", "dashboard": "true",
			},
			dir: infra,
			want: config{stackName: "autoscaler", props: nodewright.Props{
				Cluster: nodewright.Cluster{
					Name: "prod-east", Endpoint: "https://X.gr7.us-east-1.eks.amazonaws.com", CAData: "Y2E=", KubernetesVersion: "1.33",
					ServiceCIDR: "172.20.0.0/16", DNS: "172.20.0.10", SecurityGroupID: "sg-1",
				},
				Assets:                   assets,
				Network:                  &nodewright.Network{SubnetIDs: []string{"subnet-1", "subnet-2"}, VPCID: "vpc-1"},
				NodeRoleName:             "KarpenterNodeRole-prod-east",
				NodeRoles:                []nodewright.NodeRole{{ARN: "arn:aws:iam::1:role/GPU"}, {ARN: "arn:aws:iam::1:role/Win", Windows: true}},
				NodeRolePathPrefix:       "/nodes/",
				ForwarderOIDCProviderARN: "arn:aws:iam::1:oidc-provider/x",
				FeatureGates:             map[string]bool{"SpotToSpotConsolidation": true, "NodeRepair": false},
				LogRetentionDays:         90,
				LogLevel:                 "debug",
				AlarmTopicARN:            "arn:aws:sns:us-east-1:1:oncall",
				IsolatedVPC:              true,
				Dashboard:                true,
			}},
		},
		{
			name: "should read JSON values from cdk.json",
			ctx: map[string]any{
				"clusterName": "prod-east", "interruption": false, "logRetentionDays": float64(7),
				"subnetIds": []any{"subnet-1"}, "securityGroupIds": []any{"sg-9"},
			},
			dir: infra,
			want: config{stackName: "nodewright-prod-east", props: func() nodewright.Props {
				p := defaults("prod-east")
				p.Interruption = false
				p.LogRetentionDays = 7
				p.Network = &nodewright.Network{SubnetIDs: []string{"subnet-1"}, SecurityGroupIDs: []string{"sg-9"}}
				return p
			}()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadConfig(contextOf(tt.ctx), envOf(tt.env), tt.dir)
			if err != nil {
				t.Fatalf("loadConfig() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(config{})); diff != "" {
				t.Errorf("loadConfig() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	_, infra := repo(t)
	tests := []struct {
		name string
		ctx  map[string]any
		dir  string
		want []string
	}{
		{name: "should require the cluster name", ctx: map[string]any{}, dir: infra, want: []string{"context clusterName: required"}},
		{
			name: "should report every malformed value at once",
			ctx: map[string]any{
				"clusterName": "c", "interruption": "maybe", "logRetentionDays": "a month", "featureGates": "NodeRepair",
				"reservedConcurrency": float64(1), "subnetIds": float64(3), "isolatedVPC": "yes",
			},
			dir: infra,
			want: []string{
				`context interruption: "maybe" is not true or false`, "context logRetentionDays: a month is not an integer",
				`context featureGates: "NodeRepair" is not Name=true or Name=false`, "context reservedConcurrency: 1 is not true or false",
				`context isolatedVPC: "yes" is not true or false`,
				"context subnetIds: 3 is not a list",
			},
		},
		{
			name: "should refuse a malformed cluster ARN",
			ctx:  map[string]any{"clusterArn": "arn:aws:ecs:us-east-1:1:cluster/x"},
			dir:  infra,
			want: []string{"context clusterArn:", "is not an EKS cluster ARN", "context clusterName: required"},
		},
		{
			name: "should refuse a cluster ARN naming another cluster",
			ctx:  map[string]any{"clusterName": "a", "clusterArn": "arn:aws:eks:us-east-1:1:cluster/b"},
			dir:  infra,
			want: []string{`names cluster "b", not "a"`},
		},
		{
			name: "should fail outside the repository",
			ctx:  map[string]any{"clusterName": "c"},
			dir:  string(filepath.Separator),
			want: []string{"repository root: no cdk.json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(contextOf(tt.ctx), envOf(nil), tt.dir)
			if err == nil {
				t.Fatal("loadConfig() error = nil")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("loadConfig() error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
