package amifamily_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/amifamily"
)

func TestLaunchTags(t *testing.T) {
	tests := []struct {
		name     string
		userTags map[string]string
		want     map[string]string
	}{
		{name: "should tag with the cluster, nodepool, nodeclass and nodewright's ownership mark", want: map[string]string{
			"kubernetes.io/cluster/prod":     "owned",
			"eks:eks-cluster-name":           "prod",
			"karpenter.sh/nodepool":          "default",
			"karpenter.k8s.aws/ec2nodeclass": "gpu",
			"nodewright.dev/owner":           "prod",
		}},
		{name: "should add the node class's spec.tags", userTags: map[string]string{"team": "ml", "cost-center": "42"}, want: map[string]string{
			"kubernetes.io/cluster/prod":     "owned",
			"eks:eks-cluster-name":           "prod",
			"karpenter.sh/nodepool":          "default",
			"karpenter.k8s.aws/ec2nodeclass": "gpu",
			"nodewright.dev/owner":           "prod",
			"team":                           "ml",
			"cost-center":                    "42",
		}},
		{name: "should not let spec.tags override nodewright's tags", userTags: map[string]string{"karpenter.sh/nodepool": "other", "nodewright.dev/owner": "someone-else"}, want: map[string]string{
			"kubernetes.io/cluster/prod":     "owned",
			"eks:eks-cluster-name":           "prod",
			"karpenter.sh/nodepool":          "default",
			"karpenter.k8s.aws/ec2nodeclass": "gpu",
			"nodewright.dev/owner":           "prod",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := amifamily.LaunchTags("prod", "default", "gpu", tt.userTags)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("LaunchTags() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRegistrationTags(t *testing.T) {
	want := map[string]string{"Name": "ip-10-0-0-1.ec2.internal", "karpenter.sh/nodeclaim": "default-abcde", "eks:eks-cluster-name": "prod"}
	if diff := cmp.Diff(want, amifamily.RegistrationTags("prod", "ip-10-0-0-1.ec2.internal", "default-abcde")); diff != "" {
		t.Errorf("RegistrationTags() mismatch (-want +got):\n%s", diff)
	}
}

func TestValidateTags(t *testing.T) {
	ok := []map[string]string{nil, {"team": "a"}, {"kubernetes.io/role": "x", "Name": "custom"}}
	for _, tags := range ok {
		if err := amifamily.ValidateTags(tags); err != nil {
			t.Errorf("ValidateTags(%v) error = %v", tags, err)
		}
	}
}

func TestValidateTagsErrors(t *testing.T) {
	many := map[string]string{}
	for i := range 46 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	tests := []struct {
		name    string
		give    map[string]string
		wantMsg string
	}{
		{name: "empty key", give: map[string]string{"": "x"}, wantMsg: "empty key"},
		{name: "eks:eks-cluster-name is restricted", give: map[string]string{"eks:eks-cluster-name": "x"}, wantMsg: `spec.tags["eks:eks-cluster-name"]: restricted`},
		{name: "kubernetes.io/cluster/* is restricted", give: map[string]string{"kubernetes.io/cluster/prod": "owned"}, wantMsg: "restricted"},
		{name: "karpenter.sh/nodepool is restricted", give: map[string]string{"karpenter.sh/nodepool": "x"}, wantMsg: "restricted"},
		{name: "karpenter.sh/nodeclaim is restricted", give: map[string]string{"karpenter.sh/nodeclaim": "x"}, wantMsg: "restricted"},
		{name: "karpenter.k8s.aws/ec2nodeclass is restricted", give: map[string]string{"karpenter.k8s.aws/ec2nodeclass": "x"}, wantMsg: "restricted"},
		{name: "nodewright's ownership mark is restricted", give: map[string]string{"nodewright.dev/owner": "prod"}, wantMsg: `spec.tags["nodewright.dev/owner"]: restricted`},
		{name: "aws: prefix is reserved", give: map[string]string{"aws:cloudformation:stack-name": "x"}, wantMsg: "reserved by AWS"},
		{name: "key too long", give: map[string]string{strings.Repeat("k", 129): "x"}, wantMsg: "key longer"},
		{name: "value too long", give: map[string]string{"k": strings.Repeat("v", 257)}, wantMsg: "value longer"},
		{name: "too many tags", give: many, wantMsg: "at most 45"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := amifamily.ValidateTags(tt.give)
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("ValidateTags() error = %v, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestDefaultBlockDeviceMappings(t *testing.T) {
	type volume struct {
		Device string
		Size   string
	}
	tests := []struct {
		family amifamily.Family
		want   []volume
	}{
		{family: amifamily.AL2, want: []volume{{"/dev/xvda", "20Gi"}}},
		{family: amifamily.AL2023, want: []volume{{"/dev/xvda", "20Gi"}}},
		{family: amifamily.Bottlerocket, want: []volume{{"/dev/xvda", "4Gi"}, {"/dev/xvdb", "20Gi"}}},
		{family: amifamily.Windows2022, want: []volume{{"/dev/sda1", "50Gi"}}},
		{family: amifamily.Custom, want: nil},
	}
	for _, tt := range tests {
		t.Run(string(tt.family), func(t *testing.T) {
			var got []volume
			for _, m := range tt.family.DefaultBlockDeviceMappings() {
				if *m.EBS.VolumeType != "gp3" || !*m.EBS.Encrypted || !*m.EBS.DeleteOnTermination {
					t.Errorf("%s: want gp3, encrypted, deleted on termination; got %+v", *m.DeviceName, *m.EBS)
				}
				got = append(got, volume{*m.DeviceName, m.EBS.VolumeSize.String()})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DefaultBlockDeviceMappings() mismatch (-want +got):\n%s", diff)
			}
			if len(tt.want) > 0 && tt.family.EphemeralDevice() != tt.want[len(tt.want)-1].Device {
				t.Errorf("EphemeralDevice() = %q, want the last default volume %q", tt.family.EphemeralDevice(), tt.want[len(tt.want)-1].Device)
			}
		})
	}
}
