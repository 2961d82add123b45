package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

func staticCredentials(context.Context, string) (aws.CredentialsProvider, string, error) {
	return credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""), "", nil
}

// fakeAPI answers POST /prod/v1/replacements with status and body, and
// records the requests.
func fakeAPI(t *testing.T, status int, body any) (*httptest.Server, *[]*http.Request, *[]v1.ReplacementRequest) {
	t.Helper()
	var reqs []*http.Request
	var bodies []v1.ReplacementRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var rr v1.ReplacementRequest
		_ = json.Unmarshal(data, &rr)
		reqs, bodies = append(reqs, r), append(bodies, rr)
		if r.URL.Path != "/prod"+v1.RouteReplacements || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv, &reqs, &bodies
}

func TestRequestReplacement(t *testing.T) {
	result := v1.ReplacementResult{APIVersion: v1.APIVersion, Kind: v1.KindReplacementResult, Snapshot: "snap-2", RequestedBy: "arn:aws:iam::111122223333:user/alice",
		Nodes: []v1.ReplacementNode{{Node: "node-a", NodeClaim: "general-a", NodePool: "general", Execution: "manual-general-a-1a2b3c4d", Started: true,
			Replacements: []string{"m5.large"}, Moving: []string{"default/db-0"}, DoNotDisrupt: []string{`pod default/db-0 has karpenter.sh/do-not-disrupt: "true"`}, PDBBlocked: []string{}}},
		Budgets: []v1.ReplacementBudget{{NodePool: "general", Reason: "Drifted", Allowed: 0, Available: 0}}}
	srv, reqs, bodies := fakeAPI(t, http.StatusCreated, result)
	cfg := replaceConfig{Nodes: []string{"node-a"}, ForceAfter: 1800e9, Endpoint: srv.URL + "/prod", Region: "eu-west-1", Output: "table"}
	got, err := requestReplacement(t.Context(), cfg, staticCredentials)
	if err != nil {
		t.Fatalf("requestReplacement() error = %v", err)
	}
	if diff := cmp.Diff(result, got); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	want := []v1.ReplacementRequest{{APIVersion: v1.APIVersion, Kind: v1.KindReplacementRequest, Nodes: []string{"node-a"}, ForceAfterSeconds: 1800}}
	if diff := cmp.Diff(want, *bodies); diff != "" {
		t.Errorf("request body mismatch (-want +got):\n%s", diff)
	}
	if auth := (*reqs)[0].Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/execute-api/aws4_request") {
		t.Errorf("Authorization = %q, want a SigV4 signature for execute-api in eu-west-1", auth)
	}
	var table strings.Builder
	if err := writeReplacementTable(got, &table); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"manual-general-a-1a2b3c4d", "started", "m5.large", `node-a: pod default/db-0 has karpenter.sh/do-not-disrupt: "true" (evicted all the same)`,
		"budget general/Drifted: 0 allowed, 0 available (not consumed by a manual replacement)", "requested by arn:aws:iam::111122223333:user/alice"} {
		if !strings.Contains(table.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, table.String())
		}
	}
}

func TestRequestReplacementRefused(t *testing.T) {
	srv, reqs, _ := fakeAPI(t, http.StatusUnprocessableEntity, v1.ErrorResponse{Message: "refused 1 node(s)",
		Fields: []v1.ErrorField{{Path: "nodes[ip-10-0-0-1]", Message: "nodewright does not own it"}}})
	cfg := replaceConfig{Nodes: []string{"ip-10-0-0-1"}, Endpoint: srv.URL + "/prod", Region: "eu-west-1"}
	_, err := requestReplacement(t.Context(), cfg, staticCredentials)
	if err == nil || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), "nodes[ip-10-0-0-1]: nodewright does not own it") {
		t.Errorf("requestReplacement() error = %v, want the 422 with the refused node", err)
	}
	if len(*reqs) != 1 {
		t.Errorf("%d requests, want 1: a refusal is not retried", len(*reqs))
	}
}

func TestReplaceConfig(t *testing.T) {
	var r replaceFlags
	r.cfg.Output = "table"
	cfg, err := r.config([]string{"node-a"}, io.Discard, func(string) string { return "https://abc123.execute-api.ap-south-1.amazonaws.com/prod" })
	if err != nil || cfg.Region != "ap-south-1" || cfg.Endpoint != "https://abc123.execute-api.ap-south-1.amazonaws.com/prod" {
		t.Errorf("config() = %+v, %v; want the endpoint from the environment and its region", cfg, err)
	}
}
