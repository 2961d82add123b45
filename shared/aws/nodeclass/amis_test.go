package nodeclass_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/shared/amifamily"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
)

func ami(id, name, arch, created string, opts ...func(*ec2types.Image)) ec2types.Image {
	img := ec2types.Image{
		ImageId: aws.String(id), Name: aws.String(name), Architecture: ec2types.ArchitectureValues(arch),
		CreationDate: aws.String(created), OwnerId: aws.String("602401143452"), ImageOwnerAlias: aws.String("amazon"),
	}
	for _, o := range opts {
		o(&img)
	}
	return img
}

func deprecatedSince(when string) func(*ec2types.Image) {
	return func(img *ec2types.Image) { img.DeprecationTime = aws.String(when) }
}

func owner(id string) func(*ec2types.Image) {
	return func(img *ec2types.Image) { img.OwnerId = aws.String(id); img.ImageOwnerAlias = nil }
}

func tagged(k, v string) func(*ec2types.Image) {
	return func(img *ec2types.Image) {
		img.Tags = append(img.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
}

func archReq(arch string) []v1.NodeSelectorRequirementWithMinValues {
	return []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}}}
}

func aliasParams(t *testing.T, alias, k8s string) []amifamily.Parameter {
	t.Helper()
	a, err := amifamily.ParseAlias(alias)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := a.Parameters(k8s)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestAMIsFromAlias(t *testing.T) {
	e, s := awstest.NewEC2(t), awstest.NewSSM(t)
	params := aliasParams(t, "al2023@latest", "1.33")
	// amd64 standard, amd64 nvidia, arm64 standard exist; neuron and arm64
	// nvidia parameters are missing.
	s.Put(params[0].Name, "ami-amd")
	s.Put(params[1].Name, "ami-nvidia")
	s.Put(params[3].Name, "ami-arm")
	e.AddImage(ami("ami-amd", "al2023-x86_64-standard", "x86_64", "2026-01-01T00:00:00Z"))
	e.AddImage(ami("ami-nvidia", "al2023-x86_64-nvidia", "x86_64", "2025-12-01T00:00:00Z"))
	e.AddImage(ami("ami-arm", "al2023-arm64-standard", "arm64", "2025-12-15T00:00:00Z"))
	nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMISelectorTerms: []v1.AMISelectorTerm{{Alias: "al2023@latest"}}}}
	got, err := nodeclass.New(e, s, clock).AMIs(t.Context(), nc, "1.33")
	if err != nil {
		t.Fatalf("AMIs() error = %v", err)
	}
	want := []v1.AMI{
		{ID: "ami-amd", Name: "al2023-x86_64-standard", Requirements: params[0].Requirements},
		{ID: "ami-arm", Name: "al2023-arm64-standard", Requirements: params[3].Requirements},
		{ID: "ami-nvidia", Name: "al2023-x86_64-nvidia", Requirements: params[1].Requirements},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AMIs() mismatch (-want +got):\n%s", diff)
	}
	var asked []string
	for _, in := range s.On.GetParameter.Inputs() {
		asked = append(asked, *in.Name)
	}
	var wantAsked []string
	for _, p := range params {
		wantAsked = append(wantAsked, p.Name)
	}
	if diff := cmp.Diff(wantAsked, asked); diff != "" {
		t.Errorf("GetParameter names mismatch (-want +got):\n%s", diff)
	}
	if n := e.On.DescribeImages.Count(); n != 1 {
		t.Errorf("DescribeImages calls = %d, want 1", n)
	}
}

func TestAMIsFromPinnedAlias(t *testing.T) {
	e, s := awstest.NewEC2(t), awstest.NewSSM(t)
	s.Put("/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.30-v20240807/image_id", "ami-pinned")
	s.Put("/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/recommended/image_id", "ami-latest")
	e.AddImage(ami("ami-pinned", "amazon-eks-node-al2023-x86_64-standard-1.30-v20240807", "x86_64", "2024-08-07T00:00:00Z"))
	e.AddImage(ami("ami-latest", "amazon-eks-node-al2023-x86_64-standard-1.30-v20251201", "x86_64", "2025-12-01T00:00:00Z"))
	nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMISelectorTerms: []v1.AMISelectorTerm{{Alias: "al2023@v20240807"}}}}
	got, err := nodeclass.New(e, s, clock).AMIs(t.Context(), nc, "1.30")
	if err != nil {
		t.Fatalf("AMIs() error = %v", err)
	}
	if len(got) != 1 || got[0].ID != "ami-pinned" {
		t.Errorf("AMIs() = %+v, want only ami-pinned", got)
	}
}

func TestAMIsFromTerms(t *testing.T) {
	tests := []struct {
		name   string
		terms  []v1.AMISelectorTerm
		images []ec2types.Image
		params map[string]string
		want   []v1.AMI
	}{
		{
			name:  "should keep the newest image per architecture",
			terms: []v1.AMISelectorTerm{{Tags: map[string]string{"team": "ml"}}},
			images: []ec2types.Image{
				ami("ami-old", "ml-1", "x86_64", "2025-01-01T00:00:00Z", tagged("team", "ml")),
				ami("ami-new", "ml-2", "x86_64", "2025-06-01T00:00:00Z", tagged("team", "ml")),
				ami("ami-arm", "ml-arm", "arm64", "2025-02-01T00:00:00Z", tagged("team", "ml")),
				ami("ami-other", "other", "x86_64", "2025-12-01T00:00:00Z", tagged("team", "web")),
			},
			want: []v1.AMI{
				{ID: "ami-new", Name: "ml-2", Requirements: archReq("amd64")},
				{ID: "ami-arm", Name: "ml-arm", Requirements: archReq("arm64")},
			},
		},
		{
			name:  "should prefer a non-deprecated image over a newer deprecated one",
			terms: []v1.AMISelectorTerm{{Name: "custom-*"}},
			images: []ec2types.Image{
				ami("ami-1", "custom-1", "x86_64", "2025-01-01T00:00:00Z"),
				ami("ami-2", "custom-2", "x86_64", "2025-06-01T00:00:00Z", deprecatedSince("2025-12-01T00:00:00Z")),
				ami("ami-3", "custom-3", "x86_64", "2025-03-01T00:00:00Z", deprecatedSince("2027-01-01T00:00:00Z")),
			},
			want: []v1.AMI{{ID: "ami-3", Name: "custom-3", Requirements: archReq("amd64")}},
		},
		{
			name:   "should fall back to a deprecated image and say so",
			terms:  []v1.AMISelectorTerm{{ID: "ami-2"}},
			images: []ec2types.Image{ami("ami-2", "custom-2", "x86_64", "2025-06-01T00:00:00Z", deprecatedSince("2025-12-01T00:00:00Z"))},
			want:   []v1.AMI{{ID: "ami-2", Name: "custom-2", Deprecated: true, Requirements: archReq("amd64")}},
		},
		{
			name:  "should break creation-date ties by the greater name",
			terms: []v1.AMISelectorTerm{{ID: "ami-a"}, {ID: "ami-b"}},
			images: []ec2types.Image{
				ami("ami-a", "img-b", "x86_64", "2025-06-01T00:00:00Z"),
				ami("ami-b", "img-a", "x86_64", "2025-06-01T00:00:00Z"),
			},
			want: []v1.AMI{{ID: "ami-a", Name: "img-b", Requirements: archReq("amd64")}},
		},
		{
			name:  "should look names up among self and amazon images unless an owner is given",
			terms: []v1.AMISelectorTerm{{Name: "shared-*", Owner: "123456789012"}},
			images: []ec2types.Image{
				ami("ami-amazon", "shared-1", "x86_64", "2025-09-01T00:00:00Z"),
				ami("ami-partner", "shared-2", "x86_64", "2025-06-01T00:00:00Z", owner("123456789012")),
			},
			want: []v1.AMI{{ID: "ami-partner", Name: "shared-2", Requirements: archReq("amd64")}},
		},
		{
			name:   "should read an image id from an SSM parameter term",
			terms:  []v1.AMISelectorTerm{{SSMParameter: "/my/ami"}, {SSMParameter: "/missing"}},
			images: []ec2types.Image{ami("ami-ssm", "from-ssm", "arm64", "2025-06-01T00:00:00Z")},
			params: map[string]string{"/my/ami": "ami-ssm"},
			want:   []v1.AMI{{ID: "ami-ssm", Name: "from-ssm", Requirements: archReq("arm64")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, s := awstest.NewEC2(t), awstest.NewSSM(t)
			for _, img := range tt.images {
				e.AddImage(img)
			}
			for k, v := range tt.params {
				s.Put(k, v)
			}
			nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMIFamily: aws.String("AL2023"), AMISelectorTerms: tt.terms}}
			got, err := nodeclass.New(e, s, clock).AMIs(t.Context(), nc, "1.33")
			if err != nil {
				t.Fatalf("AMIs() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("AMIs() mismatch (-want +got):\n%s", diff)
			}
			for _, in := range e.On.DescribeImages.Inputs() {
				if !aws.ToBool(in.IncludeDeprecated) {
					t.Errorf("DescribeImages without IncludeDeprecated")
				}
				if !hasFilter(in.Filters, "state", "available") {
					t.Errorf("DescribeImages without state=available")
				}
			}
		})
	}
}

func hasFilter(filters []ec2types.Filter, name, value string) bool {
	for _, f := range filters {
		if aws.ToString(f.Name) == name && len(f.Values) == 1 && f.Values[0] == value {
			return true
		}
	}
	return false
}

func TestAMIsErrors(t *testing.T) {
	tests := []struct {
		name    string
		terms   []v1.AMISelectorTerm
		k8s     string
		wantErr error
	}{
		{name: "should report no AMIs when no term matches", terms: []v1.AMISelectorTerm{{Tags: map[string]string{"none": "x"}}}, k8s: "1.33", wantErr: nodeclass.ErrAMIsNotFound},
		{name: "should report no AMIs when no alias parameter exists", terms: []v1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}, k8s: "1.33", wantErr: nodeclass.ErrAMIsNotFound},
		{name: "should reject al2 on Kubernetes 1.33", terms: []v1.AMISelectorTerm{{Alias: "al2@latest"}}, k8s: "1.33", wantErr: amifamily.ErrUnsupportedAlias},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := &v1.EC2NodeClass{Spec: v1.EC2NodeClassSpec{AMISelectorTerms: tt.terms}}
			_, err := nodeclass.New(awstest.NewEC2(t), awstest.NewSSM(t), clock).AMIs(t.Context(), nc, tt.k8s)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("AMIs() error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}
