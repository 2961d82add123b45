package ec2sim_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/local/ec2sim"
	"github.com/nodewright/nodewright/shared/aws/awserr"
)

// imageName resolves an AMI ID to its name through DescribeImages.
func (e *env) imageName(t *testing.T, id string) string {
	t.Helper()
	out, err := e.ec2.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil {
		t.Fatalf("DescribeImages(%s) error = %v", id, err)
	}
	if len(out.Images) != 1 {
		t.Fatalf("DescribeImages(%s) returned %d images", id, len(out.Images))
	}
	return aws.ToString(out.Images[0].Name)
}

// Paths follow karpenter-spec §9.1 (aws: pkg/providers/amifamily/*.go).
func TestSSMAliasParameters(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		wantName string // prefix of the image name
	}{
		{name: "al2023@latest x86_64 standard", path: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
			wantName: "amazon-eks-node-al2023-x86_64-standard-1.33-v20250920"},
		{name: "al2023@v20240807 pins the older release", path: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20240807/image_id",
			wantName: "amazon-eks-node-al2023-x86_64-standard-1.33-v20240807"},
		{name: "al2023@latest arm64 nvidia", path: "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/nvidia/recommended/image_id",
			wantName: "amazon-eks-node-al2023-arm64-nvidia-1.34-v20250920"},
		{name: "al2023@latest x86_64 neuron", path: "/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/neuron/recommended/image_id",
			wantName: "amazon-eks-node-al2023-x86_64-neuron-1.32-v20250920"},
		{name: "al2@latest below 1.33", path: "/aws/service/eks/optimized-ami/1.32/amazon-linux-2/recommended/image_id",
			wantName: "amazon-eks-node-1.32-v20250920"},
		{name: "al2@v20240807 arm64", path: "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/amazon-eks-arm64-node-1.32-v20240807/image_id",
			wantName: "amazon-eks-arm64-node-1.32-v20240807"},
		{name: "al2@latest gpu", path: "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id",
			wantName: "amazon-eks-gpu-node-1.32-v20250920"},
		{name: "bottlerocket@latest x86_64", path: "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id",
			wantName: "bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-"},
		{name: "bottlerocket@v1.24.0 arm64 nvidia", path: "/aws/service/bottlerocket/aws-k8s-1.33-nvidia/arm64/1.24.0/image_id",
			wantName: "bottlerocket-aws-k8s-1.33-nvidia-arm64-v1.24.0-"},
		{name: "windows2022@latest", path: "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id",
			wantName: "Windows_Server-2022-English-Core-EKS_Optimized-1.33-2025.09.10"},
	}
	e := newEnv(t, ec2sim.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := e.param(t, tt.path)
			if got := e.imageName(t, id); !strings.HasPrefix(got, tt.wantName) {
				t.Errorf("image of %s = %s, want %s...", tt.path, got, tt.wantName)
			}
		})
	}
}

func TestSSMMissingParameters(t *testing.T) {
	tests := []struct {
		name string
		path string
	}{
		{name: "al2 is not published from 1.33", path: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2/recommended/image_id"},
		{name: "windows2025 needs 1.35", path: "/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.34/image_id"},
		{name: "unknown pinned version", path: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20990101/image_id"},
		{name: "arm64 has no neuron variant", path: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/neuron/recommended/image_id"},
		{name: "kubernetes version not seeded", path: "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id"},
	}
	e := newEnv(t, ec2sim.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.ssm.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String(tt.path)})
			var notFound *ssmtypes.ParameterNotFound
			if !errors.As(err, &notFound) || awserr.Classify(err) != awserr.NotFound {
				t.Errorf("GetParameter() error = %v, want *types.ParameterNotFound", err)
			}
		})
	}
}

func TestSSMGetParametersAndPut(t *testing.T) {
	e := newEnv(t, ec2sim.Options{KubernetesVersions: []string{"1.33"}})
	recommended := "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
	out, err := e.ssm.GetParameters(t.Context(), &ssm.GetParametersInput{Names: []string{recommended, "/aws/service/none"}})
	if err != nil {
		t.Fatalf("GetParameters() error = %v", err)
	}
	if len(out.Parameters) != 1 || aws.ToString(out.Parameters[0].Name) != recommended || !cmp.Equal(out.InvalidParameters, []string{"/aws/service/none"}) {
		t.Errorf("GetParameters() = %+v, invalid %v", out.Parameters, out.InvalidParameters)
	}

	img, err := e.sim.AddImage(ec2sim.Image{Name: "amazon-eks-node-al2023-x86_64-standard-1.33-v20260101", OwnerID: "602401143452",
		OwnerAlias: "amazon", Public: true, CreationDate: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatalf("AddImage() error = %v", err)
	}
	e.sim.PutParameter(recommended, img.ID)
	got, err := e.ssm.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String(recommended)})
	if err != nil {
		t.Fatalf("GetParameter() error = %v", err)
	}
	if aws.ToString(got.Parameter.Value) != img.ID || got.Parameter.Version != 2 {
		t.Errorf("after PutParameter: value %s version %d, want %s version 2", aws.ToString(got.Parameter.Value), got.Parameter.Version, img.ID)
	}
}

func TestDescribeImages(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	custom, err := e.sim.AddImage(ec2sim.Image{Name: "team-ml-gpu-2026", Architecture: "x86_64", Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatalf("AddImage() error = %v", err)
	}
	older := e.param(t, "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20240807/image_id")
	tests := []struct {
		name  string
		input *ec2.DescribeImagesInput
		want  []string
	}{
		{
			name: "a name wildcard omits the deprecated release",
			input: &ec2.DescribeImagesInput{Owners: []string{"amazon"},
				Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-x86_64-standard-1.33-*"}}}},
			want: []string{"amazon-eks-node-al2023-x86_64-standard-1.33-v20250920"},
		},
		{
			name: "IncludeDeprecated returns the deprecated release too, as Karpenter asks",
			input: &ec2.DescribeImagesInput{IncludeDeprecated: aws.Bool(true),
				Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-x86_64-standard-1.33-*"}}}},
			want: []string{"amazon-eks-node-al2023-x86_64-standard-1.33-v20240807", "amazon-eks-node-al2023-x86_64-standard-1.33-v20250920"},
		},
		{
			name:  "an image ID returns a deprecated image without IncludeDeprecated",
			input: &ec2.DescribeImagesInput{ImageIds: []string{older}},
			want:  []string{"amazon-eks-node-al2023-x86_64-standard-1.33-v20240807"},
		},
		{
			name: "owner account and architecture",
			input: &ec2.DescribeImagesInput{Owners: []string{"092701018921"},
				Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"arm64"}},
					{Name: aws.String("name"), Values: []string{"bottlerocket-aws-k8s-1.34-*"}}}},
			want: []string{"bottlerocket-aws-k8s-1.34-arm64-v1.46.0-", "bottlerocket-aws-k8s-1.34-nvidia-arm64-v1.46.0-"},
		},
		{
			name:  "a tag filter selects a custom image",
			input: &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:team"), Values: []string{"ml"}}}},
			want:  []string{"team-ml-gpu-2026"},
		},
		{
			name:  "owner self lists the account's images only",
			input: &ec2.DescribeImagesInput{Owners: []string{"self"}},
			want:  []string{"team-ml-gpu-2026"},
		},
		{
			name: "windows platform",
			input: &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("platform"), Values: []string{"windows"}},
				{Name: aws.String("name"), Values: []string{"*-1.32-*"}}}},
			want: []string{"Windows_Server-2019-English-Core-EKS_Optimized-1.32-2025.09.10", "Windows_Server-2022-English-Core-EKS_Optimized-1.32-2025.09.10"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.ec2.DescribeImages(t.Context(), tt.input)
			if err != nil {
				t.Fatalf("DescribeImages() error = %v", err)
			}
			var got []string
			for _, img := range out.Images {
				got = append(got, aws.ToString(img.Name))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("images = %v, want %v", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("images[%d] = %s, want %s...", i, got[i], tt.want[i])
				}
			}
		})
	}

	out, err := e.ec2.DescribeImages(t.Context(), &ec2.DescribeImagesInput{ImageIds: []string{older, custom.ID}})
	if err != nil {
		t.Fatalf("DescribeImages() error = %v", err)
	}
	for _, img := range out.Images {
		dep, _ := time.Parse(time.RFC3339, aws.ToString(img.DeprecationTime))
		created, _ := time.Parse(time.RFC3339, aws.ToString(img.CreationDate))
		switch aws.ToString(img.ImageId) {
		case older:
			if !dep.Before(epoch) || aws.ToString(img.ImageOwnerAlias) != "amazon" || aws.ToString(img.OwnerId) != "602401143452" || created.IsZero() {
				t.Errorf("older release: deprecation %v, alias %q, owner %q, created %v", dep, aws.ToString(img.ImageOwnerAlias), aws.ToString(img.OwnerId), created)
			}
		case custom.ID:
			if img.DeprecationTime != nil || aws.ToString(img.OwnerId) != "111122223333" || !created.Equal(epoch) {
				t.Errorf("custom image: deprecation %v, owner %q, created %v", img.DeprecationTime, aws.ToString(img.OwnerId), created)
			}
		}
	}
}

func TestDescribeImagesErrors(t *testing.T) {
	e := newEnv(t, ec2sim.Options{})
	tests := []struct {
		name     string
		input    *ec2.DescribeImagesInput
		wantCode string
	}{
		{name: "malformed image ID", input: &ec2.DescribeImagesInput{ImageIds: []string{"ami-xyz"}}, wantCode: "InvalidAMIID.Malformed"},
		{name: "unknown image ID", input: &ec2.DescribeImagesInput{ImageIds: []string{"ami-0123456789abcdef0"}}, wantCode: "InvalidAMIID.NotFound"},
		{name: "unknown filter", input: &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("alias"), Values: []string{"al2023@latest"}}}}, wantCode: "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.ec2.DescribeImages(t.Context(), tt.input)
			if code, _ := apiCode(err); code != tt.wantCode {
				t.Errorf("DescribeImages() error = %v, want %s", err, tt.wantCode)
			}
		})
	}
}
