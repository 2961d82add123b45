package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/manifest"
)

// runLive runs the CLI with live as the cluster reader of --from-cluster.
func runLive(t *testing.T, live func(context.Context, string, string) ([]byte, error), args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := exitOK
	root := newRoot(cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, code: &code, live: live})
	root.SetArgs(args)
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("execute %q: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

// fakeClusterOf is a dynamic fake clientset holding the objects of the
// manifests at paths, and the kubeconfig and context --from-cluster asked for.
func fakeClusterOf(t *testing.T, paths ...string) (live func(context.Context, string, string) ([]byte, error), asked *[2]string) {
	t.Helper()
	objs, err := manifest.ReadPaths(paths, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ros []runtime.Object
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(o.Raw); err != nil {
			t.Fatalf("%s: %v", o.Source, err)
		}
		ros = append(ros, u)
	}
	lists := map[schema.GroupVersionResource]string{}
	for _, k := range kube.SnapshotKinds {
		lists[k.Resource] = k.Kind + "List"
	}
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, ros...)
	asked = new([2]string)
	return func(ctx context.Context, kubeconfig, kubeContext string) ([]byte, error) {
		asked[0], asked[1] = kubeconfig, kubeContext
		return kube.Snapshot(ctx, dc)
	}, asked
}

// rolloutTimeline decodes the -o json report of a rollout.
func rolloutTimeline(t *testing.T, stdout string) rolloutReport {
	t.Helper()
	var r rolloutReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("rollout -o json: %v\n%s", err, stdout)
	}
	return r
}

// --from-cluster reads the snapshot from the cluster's API server: the forecast of
// a cluster holding the objects of the snapshot file, with the change from
// -f, is the forecast of the file.
func TestRolloutLiveForecastsTheClusterLikeItsManifests(t *testing.T) {
	window := []string{"--from", disruptionNow, "--until", "2026-01-01T03:00:00Z", "-o", "json"}
	code, stdout, stderr := runCLI(t, "", append([]string{"rollout", "-f", "testdata/disruption/drift", "-f", "testdata/rollout/pin.yaml"}, window...)...)
	if code != 0 {
		t.Fatalf("rollout -f: exit %d: %s", code, stderr)
	}
	want := rolloutTimeline(t, stdout)
	live, asked := fakeClusterOf(t, "testdata/disruption/drift")
	code, stdout, stderr = runLive(t, live, append([]string{"rollout", "--from-cluster", "--kubeconfig", "/k/config", "--context", "prod", "-f", "testdata/rollout/pin.yaml"}, window...)...)
	if code != 0 {
		t.Fatalf("rollout --from-cluster: exit %d: %s", code, stderr)
	}
	got := rolloutTimeline(t, stdout)
	if *asked != [2]string{"/k/config", "prod"} {
		t.Errorf("--from-cluster read kubeconfig %q context %q; want /k/config and prod", asked[0], asked[1])
	}
	if len(want.Steps) == 0 {
		t.Fatal("the file forecast replaces nothing; the comparison proves nothing")
	}
	if diff := cmp.Diff(want.Timeline, got.Timeline); diff != "" {
		t.Errorf("--from-cluster timeline differs from the file's (-file +live):\n%s", diff)
	}
	if len(got.Changes) != 1 || !strings.Contains(got.Changes[0], "pinned to ami-0pinned") {
		t.Errorf("--from-cluster changes = %q; want the AMI pin", got.Changes)
	}
	// Without a change the live cluster is forecast as it is: nothing is
	// drifted, nothing is replaced.
	code, stdout, stderr = runLive(t, live, append([]string{"rollout", "--from-cluster"}, window...)...)
	if code != 0 {
		t.Fatalf("rollout --from-cluster without -f: exit %d: %s", code, stderr)
	}
	if r := rolloutTimeline(t, stdout); len(r.Changes) != 0 {
		t.Errorf("rollout --from-cluster without -f: changes %q; want none", r.Changes)
	}
}

func TestRolloutLiveErrors(t *testing.T) {
	failing := func(context.Context, string, string) ([]byte, error) {
		return nil, errors.New("list nodepools: connection refused")
	}
	tests := []struct {
		name     string
		args     []string
		code     int
		inStderr string
	}{
		{"--kubeconfig without --from-cluster is a usage error", []string{"rollout", "-f", "testdata/disruption/drift", "--kubeconfig", "x"}, exitUsage, "--kubeconfig and --context need --from-cluster"},
		{"--context without --from-cluster is a usage error", []string{"rollout", "-f", "testdata/disruption/drift", "--context", "x"}, exitUsage, "--kubeconfig and --context need --from-cluster"},
		{"neither -f nor --from-cluster is a usage error", []string{"rollout"}, exitUsage, "at least one -f is required (the cluster snapshot, or --from-cluster)"},
		{"a failed cluster read fails the command, naming --from-cluster", []string{"rollout", "--from-cluster", "--from", disruptionNow}, exitFailed, "--from-cluster: list nodepools: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runLive(t, failing, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.inStderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.inStderr)
			}
		})
	}
}
