package handler_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/functions/provisioner/handler"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// linkingRegistrar registers like registrar and links the NodeClaim to the
// Node (status.providerID and nodeName), as a registration does.
type linkingRegistrar struct{ *registrar }

func (r linkingRegistrar) Register(ctx context.Context, n *corev1.Node, now time.Time) (provisioning.Registration, error) {
	reg, err := r.registrar.Register(ctx, n, now)
	reg.NodeClaim.Status.ProviderID, reg.NodeClaim.Status.NodeName = n.Spec.ProviderID, n.Name
	return reg, err
}

// tagger records the NodeClaims it tags and fails with err; safe for the
// handler's concurrent registrations.
type tagger struct {
	mu     sync.Mutex
	claims []string
	err    error
}

func (t *tagger) Tag(_ context.Context, c v1.NodeClaim) (provisioning.TagResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.claims = append(t.claims, c.Name)
	return provisioning.TagResult{NodeClaim: c.Name, Err: t.err}, t.err
}

func TestHandleTagsInstancesAfterRegistration(t *testing.T) {
	tests := []struct {
		name      string
		linked    bool
		tagErr    error
		wantTags  []string
		wantRetry []string
	}{
		{name: "should tag the instance of each registered NodeClaim", linked: true, wantTags: []string{"claim-node-a", "claim-node-b"}},
		{name: "should acknowledge the registration when tagging fails", linked: true, tagErr: errors.New("UnauthorizedOperation"), wantTags: []string{"claim-node-a", "claim-node-b"}},
		{name: "should not tag a NodeClaim without its Node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture()
			tg := &tagger{err: tt.tagErr}
			var reg interface {
				Register(context.Context, *corev1.Node, time.Time) (provisioning.Registration, error)
			} = f.reg
			if tt.linked {
				reg = linkingRegistrar{f.reg}
			}
			h, err := handler.NewWithDeps(handler.Deps{
				Provisioner: f.prov, Registrar: reg, Tagger: tg, Nodes: f.nodes, Payloads: f.payloads, Results: f.results, Events: f.events,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return t0 },
			})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
				record("m1", "NodeRegistrations", registrations("r1", "node-a", "node-b")),
			}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantRetry, failures(resp)); diff != "" {
				t.Errorf("redelivered records mismatch (-want +got):\n%s", diff)
			}
			// Nodes register concurrently: the order is not a promise.
			if diff := cmp.Diff(tt.wantTags, tg.claims, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("tagged NodeClaims mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
