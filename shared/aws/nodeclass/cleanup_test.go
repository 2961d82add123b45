package nodeclass_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/aws/awstest"
	"github.com/nodewright/nodewright/shared/aws/nodeclass"
	"github.com/nodewright/nodewright/shared/launch"
)

// templateAPI serves DescribeLaunchTemplates one template a page and
// records deletions.
type templateAPI struct {
	templates []ec2types.LaunchTemplate
	inputs    []*ec2.DescribeLaunchTemplatesInput
	deleted   []string
	deleteErr error
}

func (a *templateAPI) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	a.inputs = append(a.inputs, in)
	i := 0
	if in.NextToken != nil {
		i = int((*in.NextToken)[0] - '0')
	}
	out := &ec2.DescribeLaunchTemplatesOutput{}
	if i < len(a.templates) {
		out.LaunchTemplates = a.templates[i : i+1]
	}
	if i+1 < len(a.templates) {
		out.NextToken = aws.String(string(rune('0' + i + 1)))
	}
	return out, nil
}

func (a *templateAPI) DeleteLaunchTemplate(_ context.Context, in *ec2.DeleteLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	a.deleted = append(a.deleted, aws.ToString(in.LaunchTemplateId))
	return &ec2.DeleteLaunchTemplateOutput{}, a.deleteErr
}

func TestTemplatesList(t *testing.T) {
	created := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	lt := func(id, name, class string) ec2types.LaunchTemplate {
		return ec2types.LaunchTemplate{LaunchTemplateId: aws.String(id), LaunchTemplateName: aws.String(name), CreateTime: aws.Time(created),
			Tags: []ec2types.Tag{{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String(class)}, {Key: aws.String("team"), Value: aws.String("x")}}}
	}
	api := &templateAPI{templates: []ec2types.LaunchTemplate{
		lt("lt-1", "nodewright/aaa", "default"),
		lt("lt-2", "karpenter.k8s.aws/bbb", "default"),
		lt("lt-3", "nodewright/ccc", "gpu"),
	}}
	got, err := nodeclass.NewTemplates(api).List(t.Context(), "prod")
	if err != nil {
		t.Fatalf("List() error = %v", err)
	}
	want := []launch.ClusterTemplate{
		{ID: "lt-1", Name: "nodewright/aaa", NodeClass: "default", CreateTime: created, Tags: map[string]string{"karpenter.k8s.aws/ec2nodeclass": "default", "team": "x"}},
		{ID: "lt-3", Name: "nodewright/ccc", NodeClass: "gpu", CreateTime: created, Tags: map[string]string{"karpenter.k8s.aws/ec2nodeclass": "gpu", "team": "x"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List() mismatch, want every page and only nodewright's templates (-want +got):\n%s", diff)
	}
	wantFilters := []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/prod"), Values: []string{"owned"}},
		{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{"prod"}},
		{Name: aws.String("tag-key"), Values: []string{"karpenter.sh/nodepool"}},
	}
	if diff := cmp.Diff(wantFilters, api.inputs[0].Filters, sdkOpts); diff != "" {
		t.Errorf("filters mismatch (-want +got):\n%s", diff)
	}
	if len(api.inputs) != 3 {
		t.Errorf("DescribeLaunchTemplates calls = %d, want 3 (one a page)", len(api.inputs))
	}
	if _, err := nodeclass.NewTemplates(api).List(t.Context(), ""); err == nil {
		t.Error("List(\"\") error = nil, want one")
	}
}

func TestTemplatesDelete(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{name: "should delete by ID"},
		{name: "should treat a template already gone as deleted", err: awstest.APIError("InvalidLaunchTemplateId.NotFound", "gone")},
		{name: "should return other failures", err: awstest.APIError("UnauthorizedOperation", "no"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &templateAPI{deleteErr: tt.err}
			err := nodeclass.NewTemplates(api).Delete(t.Context(), "lt-1")
			if (err != nil) != tt.wantErr {
				t.Errorf("Delete() error = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff([]string{"lt-1"}, api.deleted); diff != "" {
				t.Errorf("deleted mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
