package handler_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/functions/decider"
	"github.com/nodewright/nodewright/functions/replace/handler"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/disruption"
	"github.com/nodewright/nodewright/shared/scheduling"
)

const caller = "arn:aws:sts::111122223333:assumed-role/platform-oncall/alice"

// fakeReplacer records the request and answers res or err.
type fakeReplacer struct {
	got []decider.ReplaceRequest
	res decider.ReplaceResult
	err error
}

func (f *fakeReplacer) Replace(_ context.Context, req decider.ReplaceRequest) (decider.ReplaceResult, error) {
	f.got = append(f.got, req)
	return f.res, f.err
}

func post(body string) events.APIGatewayProxyRequest {
	req := events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Path: v1.RouteReplacements, Body: body}
	req.RequestContext.Identity.UserArn = caller
	return req
}

func serve(t *testing.T, f *fakeReplacer, req events.APIGatewayProxyRequest) (int, string) {
	t.Helper()
	resp, err := handler.New(f, slog.New(slog.NewTextHandler(io.Discard, nil))).Handle(t.Context(), req)
	if err != nil {
		t.Fatalf("Handle() error = %v", err)
	}
	return resp.StatusCode, resp.Body
}

func TestHandle(t *testing.T) {
	id := disruption.ManualID("general-a", disruption.ManualRequest{Nodes: []string{"node-a"}, ForceAfter: time.Minute})
	f := &fakeReplacer{res: decider.ReplaceResult{
		Snapshot: "snap-2",
		Plan: disruption.ManualPlan{
			Commands: []disruption.Command{{ID: id, Replacements: []disruption.Replacement{{Expected: scheduling.ExpectedOffering{InstanceType: "m5.large"}}}}},
			Nodes: []disruption.ManualNode{{Command: id, NodeClaim: "general-a", Node: "node-a", NodePool: "general",
				Moving: []string{"default/db-0"}, DoNotDisrupt: []string{"pod default/db-0 has karpenter.sh/do-not-disrupt: \"true\""}, PDBBlocked: []string{}}},
			Budgets: []disruption.BudgetStatus{{NodePool: "general", Reason: disruption.MethodDrifted, Allowed: 0, Available: 0}},
		},
		Started: []decider.Started{{Execution: id, AlreadyExisted: true}},
	}}
	status, body := serve(t, f, post(`{"apiVersion":"nodewright.dev/v1","kind":"ReplacementRequest","nodes":["node-a"],"forceAfterSeconds":60}`))
	if status != http.StatusCreated {
		t.Fatalf("status = %d (%s), want 201", status, body)
	}
	wantReq := []decider.ReplaceRequest{{ManualRequest: disruption.ManualRequest{Nodes: []string{"node-a"}, ForceAfter: time.Minute}, RequestedBy: caller}}
	if diff := cmp.Diff(wantReq, f.got); diff != "" {
		t.Errorf("Replace() request mismatch (-want +got):\n%s", diff)
	}
	var got v1.ReplacementResult
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := v1.ReplacementResult{APIVersion: v1.APIVersion, Kind: v1.KindReplacementResult, Snapshot: "snap-2", RequestedBy: caller,
		Nodes: []v1.ReplacementNode{{Node: "node-a", NodeClaim: "general-a", NodePool: "general", Execution: id, Started: true, AlreadyExisted: true,
			Replacements: []string{"m5.large"}, Moving: []string{"default/db-0"}, DoNotDisrupt: []string{"pod default/db-0 has karpenter.sh/do-not-disrupt: \"true\""}, PDBBlocked: []string{}}},
		Budgets: []v1.ReplacementBudget{{NodePool: "general", Reason: "Drifted"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answer mismatch (-want +got):\n%s", diff)
	}
}

func TestHandleErrors(t *testing.T) {
	valid := `{"apiVersion":"nodewright.dev/v1","kind":"ReplacementRequest","nodes":["node-a"]}`
	tests := []struct {
		name       string
		req        events.APIGatewayProxyRequest
		err        error
		wantStatus int
		wantField  string
	}{
		{name: "should refuse nodes it does not own with one field each", req: post(valid),
			err: &disruption.RefusedError{Refusals: []disruption.Refusal{{Node: "ip-1", Reason: "nodewright does not own it"}}}, wantStatus: http.StatusUnprocessableEntity, wantField: "nodes[ip-1]"},
		{name: "should reject a negative forceAfterSeconds", req: post(`{"apiVersion":"nodewright.dev/v1","kind":"ReplacementRequest","nodes":["a"],"forceAfterSeconds":-1}`),
			wantStatus: http.StatusBadRequest, wantField: "forceAfterSeconds"},
		{name: "should reject a node listed twice", req: post(`{"apiVersion":"nodewright.dev/v1","kind":"ReplacementRequest","nodes":["a","a"]}`),
			wantStatus: http.StatusBadRequest, wantField: "nodes[1]"},
		{name: "should reject a request without nodes", req: post(`{"apiVersion":"nodewright.dev/v1","kind":"ReplacementRequest"}`),
			wantStatus: http.StatusBadRequest, wantField: "nodes"},
		{name: "should answer 403 without a caller identity", req: func() events.APIGatewayProxyRequest {
			r := post(valid)
			r.RequestContext.Identity.UserArn = ""
			return r
		}(), err: decider.ErrNoIdentity, wantStatus: http.StatusForbidden},
		{name: "should answer 503 before the forwarder's first snapshot", req: post(valid), err: decider.ErrNoClusterState, wantStatus: http.StatusServiceUnavailable},
		{name: "should answer 405 to a GET", req: func() events.APIGatewayProxyRequest { r := post(""); r.HTTPMethod = http.MethodGet; return r }(), wantStatus: http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeReplacer{err: tt.err}
			status, body := serve(t, f, tt.req)
			if status != tt.wantStatus {
				t.Fatalf("status = %d (%s), want %d", status, body, tt.wantStatus)
			}
			var resp v1.ErrorResponse
			if err := json.Unmarshal([]byte(body), &resp); err != nil {
				t.Fatal(err)
			}
			if tt.wantField != "" && (len(resp.Fields) == 0 || resp.Fields[0].Path != tt.wantField) {
				t.Errorf("fields = %+v, want the first at %s", resp.Fields, tt.wantField)
			}
		})
	}
}
