package handler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/functions/gc/handler"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// refresher returns a scripted refresh.
type refresher struct {
	res provisioning.RefreshResult
	err error
}

func (r refresher) Refresh(context.Context, time.Time) (provisioning.RefreshResult, error) {
	return r.res, r.err
}

func TestHandleRefreshesTheLiveEC2Data(t *testing.T) {
	tests := []struct {
		name string
		give refresher
		want *handler.EC2DataRefresh
	}{
		{name: "should report the parts stored", give: refresher{res: provisioning.RefreshResult{Due: catalog.Parts, Stored: catalog.Parts}},
			want: &handler.EC2DataRefresh{Due: catalog.Parts, Stored: catalog.Parts}},
		{name: "should not fail the run when the APIs are throttled",
			give: refresher{res: provisioning.RefreshResult{Due: catalog.Parts, Stored: catalog.Parts[:3]}, err: errors.New("spot-prices: RequestLimitExceeded")},
			want: &handler.EC2DataRefresh{Due: catalog.Parts, Stored: catalog.Parts[:3], Error: "spot-prices: RequestLimitExceeded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := newHandler(t, collector{}).WithRefresher(tt.give).Handle(t.Context(), nil)
			if err != nil {
				t.Fatalf("Handle() error = %v, want the run to succeed", err)
			}
			if diff := cmp.Diff(tt.want, out.EC2Data); diff != "" {
				t.Errorf("Output.EC2Data (-want +got):\n%s", diff)
			}
		})
	}
}
