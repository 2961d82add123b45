package handler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/functions/gc/handler"
	"github.com/nodewright/nodewright/shared/launch"
	"github.com/nodewright/nodewright/shared/provisioning"
	"github.com/nodewright/nodewright/shared/workflow"
)

type tagger struct {
	results []provisioning.TagResult
	err     error
	calls   int
}

func (t *tagger) TagAll(context.Context) ([]provisioning.TagResult, error) {
	t.calls++
	return t.results, t.err
}

type templates struct {
	results []provisioning.TemplateCleanupResult
	err     error
	calls   int
}

func (c *templates) CollectLaunchTemplates(_ context.Context, now time.Time) ([]provisioning.TemplateCleanupResult, error) {
	c.calls++
	if !now.Equal(t0) {
		return nil, fmt.Errorf("now = %v, want the handler's clock", now)
	}
	return c.results, c.err
}

func TestHandleHousekeeping(t *testing.T) {
	lt := provisioning.TemplateCleanup{ClusterTemplate: launch.ClusterTemplate{ID: "lt-1", Name: "nodewright/a", NodeClass: "default"}, Reason: provisioning.TemplateUnused}
	tag := provisioning.TagResult{NodeClaim: "default-a", InstanceID: "i-a", Added: map[string]string{"Name": "node-a"}}
	denied := errors.New("UnauthorizedOperation")
	tests := []struct {
		name      string
		collector collector
		tagger    *tagger
		templates *templates
		want      handler.Output
		wantErr   bool
	}{
		{
			name:      "should report the tagging retries and the deleted launch templates",
			tagger:    &tagger{results: []provisioning.TagResult{tag}},
			templates: &templates{results: []provisioning.TemplateCleanupResult{{TemplateCleanup: lt}}},
			want: handler.Output{Cleanups: []handler.Cleanup{}, Tagged: []handler.Tagged{{TagResult: tag}},
				LaunchTemplates: []handler.LaunchTemplate{{TemplateCleanup: lt}}},
		},
		{
			name:      "should still tag and collect templates when a cleanup failed, and report every failure",
			collector: collector{err: errors.New("collect garbage: list nodes: throttled")},
			tagger:    &tagger{results: []provisioning.TagResult{{NodeClaim: "default-a", Err: denied}}, err: denied},
			templates: &templates{results: []provisioning.TemplateCleanupResult{{TemplateCleanup: lt, Err: denied}}, err: denied},
			want: handler.Output{Cleanups: []handler.Cleanup{}, Tagged: []handler.Tagged{{TagResult: provisioning.TagResult{NodeClaim: "default-a"}, Error: "UnauthorizedOperation"}},
				LaunchTemplates: []handler.LaunchTemplate{{TemplateCleanup: lt, Error: "UnauthorizedOperation"}}},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandler(t, tt.collector).WithHousekeeping(tt.tagger, tt.templates)
			got, err := h.Handle(context.Background(), nil)
			var ire messages.InvokeResponse_Error
			if tt.wantErr != (err != nil) || (err != nil && (!errors.As(err, &ire) || ire.Type != workflow.ErrInternal)) {
				t.Fatalf("Handle() error = %#v, want workflow error %v", err, tt.wantErr)
			}
			for i := range got.Tagged {
				got.Tagged[i].Err = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Handle() mismatch (-want +got):\n%s", diff)
			}
			if tt.tagger.calls != 1 || tt.templates.calls != 1 {
				t.Errorf("TagAll calls %d, CollectLaunchTemplates calls %d; want one each", tt.tagger.calls, tt.templates.calls)
			}
		})
	}
}
