package amifamily_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

func TestParseAlias(t *testing.T) {
	tests := []struct {
		give string
		want amifamily.Alias
	}{
		{give: "al2023@latest", want: amifamily.Alias{Family: amifamily.AL2023, Version: "latest"}},
		{give: "al2023@v20240807", want: amifamily.Alias{Family: amifamily.AL2023, Version: "v20240807"}},
		{give: "AL2@v20240807", want: amifamily.Alias{Family: amifamily.AL2, Version: "v20240807"}},
		{give: "bottlerocket@v1.20.3", want: amifamily.Alias{Family: amifamily.Bottlerocket, Version: "v1.20.3"}},
		{give: "windows2022@latest", want: amifamily.Alias{Family: amifamily.Windows2022, Version: "latest"}},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := amifamily.ParseAlias(tt.give)
			if err != nil {
				t.Fatalf("ParseAlias() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseAlias() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAliasErrors(t *testing.T) {
	tests := []struct {
		give    string
		wantErr error
	}{
		{give: "al2023"},
		{give: "@latest"},
		{give: "custom@latest"},
		{give: "ubuntu@latest"},
		{give: "al2023@v20240807-but-far-too-long-to-fit"},
		{give: "windows2022@v20240807", wantErr: amifamily.ErrUnsupportedAlias},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := amifamily.ParseAlias(tt.give)
			if err == nil {
				t.Fatal("ParseAlias() error = nil, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("ParseAlias() error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func in(key string, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func exists(key string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpExists}
}

func dne(key string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpDoesNotExist}
}

func standard(arch string) []v1.NodeSelectorRequirementWithMinValues {
	return []v1.NodeSelectorRequirementWithMinValues{in(v1.LabelArch, arch), dne(v1.LabelInstanceGPUCount), dne(v1.LabelInstanceAcceleratorCount)}
}

func nvidia(arch string) []v1.NodeSelectorRequirementWithMinValues {
	return []v1.NodeSelectorRequirementWithMinValues{in(v1.LabelArch, arch), exists(v1.LabelInstanceGPUCount)}
}

func neuron(arch string) []v1.NodeSelectorRequirementWithMinValues {
	return []v1.NodeSelectorRequirementWithMinValues{in(v1.LabelArch, arch), exists(v1.LabelInstanceAcceleratorCount)}
}

// TestAliasParameters is the alias -> SSM path table of karpenter-spec §9.1.
func TestAliasParameters(t *testing.T) {
	const eks = "/aws/service/eks/optimized-ami/1.30/"
	tests := []struct {
		alias string
		k8s   string
		want  []amifamily.Parameter
	}{
		{alias: "al2023@latest", k8s: "1.30", want: []amifamily.Parameter{
			{Name: eks + "amazon-linux-2023/x86_64/standard/recommended/image_id", Requirements: standard("amd64")},
			{Name: eks + "amazon-linux-2023/x86_64/nvidia/recommended/image_id", Requirements: nvidia("amd64")},
			{Name: eks + "amazon-linux-2023/x86_64/neuron/recommended/image_id", Requirements: neuron("amd64")},
			{Name: eks + "amazon-linux-2023/arm64/standard/recommended/image_id", Requirements: standard("arm64")},
			{Name: eks + "amazon-linux-2023/arm64/nvidia/recommended/image_id", Requirements: nvidia("arm64")},
		}},
		{alias: "al2023@v20240807", k8s: "1.30", want: []amifamily.Parameter{
			{Name: eks + "amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.30-v20240807/image_id", Requirements: standard("amd64")},
			{Name: eks + "amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.30-v20240807/image_id", Requirements: nvidia("amd64")},
			{Name: eks + "amazon-linux-2023/x86_64/neuron/amazon-eks-node-al2023-x86_64-neuron-1.30-v20240807/image_id", Requirements: neuron("amd64")},
			{Name: eks + "amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.30-v20240807/image_id", Requirements: standard("arm64")},
			{Name: eks + "amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.30-v20240807/image_id", Requirements: nvidia("arm64")},
		}},
		{alias: "al2@latest", k8s: "1.30", want: []amifamily.Parameter{
			{Name: eks + "amazon-linux-2/recommended/image_id", Requirements: standard("amd64")},
			{Name: eks + "amazon-linux-2-gpu/recommended/image_id", Requirements: nvidia("amd64")},
			{Name: eks + "amazon-linux-2-gpu/recommended/image_id", Requirements: neuron("amd64")},
			{Name: eks + "amazon-linux-2-arm64/recommended/image_id", Requirements: standard("arm64")},
		}},
		{alias: "al2@v20240807", k8s: "1.30", want: []amifamily.Parameter{
			{Name: eks + "amazon-linux-2/amazon-eks-node-1.30-v20240807/image_id", Requirements: standard("amd64")},
			{Name: eks + "amazon-linux-2-gpu/amazon-eks-gpu-node-1.30-v20240807/image_id", Requirements: nvidia("amd64")},
			{Name: eks + "amazon-linux-2-gpu/amazon-eks-gpu-node-1.30-v20240807/image_id", Requirements: neuron("amd64")},
			{Name: eks + "amazon-linux-2-arm64/amazon-eks-arm64-node-1.30-v20240807/image_id", Requirements: standard("arm64")},
		}},
		{alias: "bottlerocket@latest", k8s: "1.30", want: []amifamily.Parameter{
			{Name: "/aws/service/bottlerocket/aws-k8s-1.30/x86_64/latest/image_id", Requirements: standard("amd64")},
			{Name: "/aws/service/bottlerocket/aws-k8s-1.30/x86_64/latest/image_id", Requirements: neuron("amd64")},
			{Name: "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/x86_64/latest/image_id", Requirements: nvidia("amd64")},
			{Name: "/aws/service/bottlerocket/aws-k8s-1.30/arm64/latest/image_id", Requirements: standard("arm64")},
			{Name: "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/arm64/latest/image_id", Requirements: nvidia("arm64")},
		}},
		{alias: "bottlerocket@v1.20.3", k8s: "1.30", want: []amifamily.Parameter{
			{Name: "/aws/service/bottlerocket/aws-k8s-1.30/x86_64/1.20.3/image_id", Requirements: standard("amd64")},
			{Name: "/aws/service/bottlerocket/aws-k8s-1.30/x86_64/1.20.3/image_id", Requirements: neuron("amd64")},
			{Name: "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/x86_64/1.20.3/image_id", Requirements: nvidia("amd64")},
			{Name: "/aws/service/bottlerocket/aws-k8s-1.30/arm64/1.20.3/image_id", Requirements: standard("arm64")},
			{Name: "/aws/service/bottlerocket/aws-k8s-1.30-nvidia/arm64/1.20.3/image_id", Requirements: nvidia("arm64")},
		}},
		{alias: "windows2019@latest", k8s: "1.30", want: []amifamily.Parameter{
			{Name: "/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.30/image_id", Requirements: []v1.NodeSelectorRequirementWithMinValues{
				in(v1.LabelArch, "amd64"), in(v1.LabelOS, "windows"), in(v1.LabelWindowsBuild, "10.0.17763")}},
		}},
		{alias: "windows2022@latest", k8s: "1.30", want: []amifamily.Parameter{
			{Name: "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.30/image_id", Requirements: []v1.NodeSelectorRequirementWithMinValues{
				in(v1.LabelArch, "amd64"), in(v1.LabelOS, "windows"), in(v1.LabelWindowsBuild, "10.0.20348")}},
		}},
		{alias: "windows2025@latest", k8s: "1.35", want: []amifamily.Parameter{
			{Name: "/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.35/image_id", Requirements: []v1.NodeSelectorRequirementWithMinValues{
				in(v1.LabelArch, "amd64"), in(v1.LabelOS, "windows"), in(v1.LabelWindowsBuild, "10.0.26100")}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.alias+" on "+tt.k8s, func(t *testing.T) {
			a, err := amifamily.ParseAlias(tt.alias)
			if err != nil {
				t.Fatalf("ParseAlias() error = %v", err)
			}
			got, err := a.Parameters(tt.k8s)
			if err != nil {
				t.Fatalf("Parameters() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parameters() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAliasParametersErrors(t *testing.T) {
	tests := []struct {
		name    string
		alias   amifamily.Alias
		k8s     string
		wantErr error
	}{
		{name: "al2 is rejected on Kubernetes 1.33", alias: amifamily.Alias{Family: amifamily.AL2, Version: "latest"}, k8s: "1.33", wantErr: amifamily.ErrUnsupportedAlias},
		{name: "windows2025 is rejected before Kubernetes 1.35", alias: amifamily.Alias{Family: amifamily.Windows2025, Version: "latest"}, k8s: "1.34", wantErr: amifamily.ErrUnsupportedAlias},
		{name: "a pinned windows version is rejected", alias: amifamily.Alias{Family: amifamily.Windows2022, Version: "v1"}, k8s: "1.30", wantErr: amifamily.ErrUnsupportedAlias},
		{name: "a malformed Kubernetes version is rejected", alias: amifamily.Alias{Family: amifamily.AL2023, Version: "latest"}, k8s: "v1.30"},
		{name: "a Kubernetes version without a minor is rejected", alias: amifamily.Alias{Family: amifamily.AL2023, Version: "latest"}, k8s: "1"},
		{name: "Custom has no alias", alias: amifamily.Alias{Family: amifamily.Custom, Version: "latest"}, k8s: "1.30"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.alias.Parameters(tt.k8s)
			if err == nil {
				t.Fatal("Parameters() error = nil, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Parameters() error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestForNodeClass(t *testing.T) {
	tests := []struct {
		name string
		give v1.EC2NodeClassSpec
		want amifamily.Family
	}{
		{name: "spec.amiFamily wins", give: v1.EC2NodeClassSpec{AMIFamily: ptr("Custom"), AMISelectorTerms: []v1.AMISelectorTerm{{Alias: "al2023@latest"}}}, want: amifamily.Custom},
		{name: "the alias names the family when spec.amiFamily is unset", give: v1.EC2NodeClassSpec{AMISelectorTerms: []v1.AMISelectorTerm{{Alias: "Bottlerocket@latest"}}}, want: amifamily.Bottlerocket},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := amifamily.ForNodeClass(&v1.EC2NodeClass{Spec: tt.give})
			if err != nil {
				t.Fatalf("ForNodeClass() error = %v", err)
			}
			if got != tt.want {
				t.Errorf("ForNodeClass() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestForNodeClassErrors(t *testing.T) {
	tests := []struct {
		name string
		give *v1.EC2NodeClass
	}{
		{name: "nil node class", give: nil},
		{name: "unknown spec.amiFamily", give: &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMIFamily: ptr("al2023")}}},
		{name: "neither family nor alias", give: &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMISelectorTerms: []v1.AMISelectorTerm{{ID: "ami-1"}}}}},
		{name: "unknown alias family", give: &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMISelectorTerms: []v1.AMISelectorTerm{{Alias: "ubuntu@latest"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := amifamily.ForNodeClass(tt.give); err == nil {
				t.Error("ForNodeClass() error = nil, want an error")
			}
		})
	}
}

func TestImageRequirements(t *testing.T) {
	tests := []struct {
		give   string
		want   []v1.NodeSelectorRequirementWithMinValues
		wantOK bool
	}{
		{give: "x86_64", want: []v1.NodeSelectorRequirementWithMinValues{in(v1.LabelArch, "amd64")}, wantOK: true},
		{give: "arm64", want: []v1.NodeSelectorRequirementWithMinValues{in(v1.LabelArch, "arm64")}, wantOK: true},
		{give: "i386"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, ok := amifamily.ImageRequirements(tt.give)
			if ok != tt.wantOK {
				t.Fatalf("ImageRequirements() ok = %v, want %v", ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ImageRequirements() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
