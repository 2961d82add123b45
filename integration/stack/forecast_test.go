package stack_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodewright/nodewright/local/stack"
	"github.com/nodewright/nodewright/shared/rollout"
	"github.com/nodewright/nodewright/shared/termination"
)

// TestRolloutForecastHoldsOnTheStack takes a rollout forecast of an AMI pin
// first (`nodewright rollout --from-cluster` against the stack's API server, with
// the stack's timings), then pins the AMI and checks that drift replaces
// exactly the nodes the forecast names, each inside its forecast window.
//
// The stack's timings are the forecast's options: evaluations every
// stack.DisruptionPoll (the stack's disruption ticker); a replacement Ready
// one readiness round (termination.PollInterval) after its execution
// starts, since the boot delay is shorter than a round and the execution
// checks readiness once per round; a drain of one drain round
// (termination.DrainPollInterval): the pause pods go at once.
//
// Tolerance: an execution may start up to one poll before its forecast
// start (the stack's ticker runs on its own phase, not on the forecast's
// --from), and start and finish up to one poll plus one readiness round
// after the forecast's start and done, plus one more poll for each
// replacement before it (i from 0: 20 s, 30 s, 40 s): the first can be
// late by one ticker phase and one readiness round the forecast rounds the
// other way, and with a budget of one node each later one waits for the
// next evaluation after a late finish. The budget makes an early start
// impossible, so an execution before its window means the forecast misread
// the budget; one after it, a forecast too optimistic by more than the
// stack's rounding. Measured on a loaded 2-core machine: every execution
// started 10.6 s after its forecast start and took 16-17 s against the
// forecast's 15 s.
//
// The disruption handler reads the wall clock (the stack has no advanced
// clock for it), so the drift runs in real time: about a minute, the test
// about two.
func TestRolloutForecastHoldsOnTheStack(t *testing.T) {
	const replicas = 3
	bootDelay := 5 * time.Second
	root, err := stack.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s := startStack(t, func(o *stack.Options) { o.Disruption = true; o.BootDelay = bootDelay })
	if !s.Wired().Drift {
		t.Skip("drift needs the local Step Functions engine (make sfn-deps)")
	}
	cli := cliBin(t, root)
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(ctx, poolYAML("forecast", "1", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, spreadOnePerNode(deployment("spread", replicas, "500m", "512Mi")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "every pod Running on its own node", func(ctx context.Context, st stack.Status) bool {
		return st.RunningPods == replicas && st.PendingPods == 0 && st.Nodes == replicas && st.ReadyNodes == replicas
	})
	before := nodeList(t, s)
	oldClaims := claimOfNode(t, s, before)
	img := addImage(t, s, "amazon-eks-node-al2023-x86_64-standard-1.34-v20261201")

	// The change: the EC2NodeClass as it is, pinned to the new image.
	nc, err := s.Dynamic.Resource(ec2NodeClassResource).Get(ctx, "production", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(nc.Object, "spec")
	spec["amiFamily"], spec["amiSelectorTerms"] = "AL2023", []any{map[string]any{"id": img.ID}}
	change, err := json.Marshal(map[string]any{"apiVersion": nc.GetAPIVersion(), "kind": nc.GetKind(), "metadata": map[string]any{"name": nc.GetName()}, "spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	changeFile := filepath.Join(t.TempDir(), "pin.json")
	if err := os.WriteFile(changeFile, change, 0o600); err != nil {
		t.Fatal(err)
	}

	poll, boot, drain := stack.DisruptionPoll, termination.PollInterval, termination.DrainPollInterval
	from := time.Now().UTC()
	fc := exec.CommandContext(ctx, cli, "rollout", "--from-cluster", "--kubeconfig", s.Kubeconfig, "-f", changeFile,
		"--from", from.Format(time.RFC3339Nano), "--until", from.Add(10*time.Minute).Format(time.RFC3339Nano),
		"--poll", poll.String(), "--boot", boot.String(), "--drain", drain.String(), "-o", "json")
	fc.Stderr = os.Stderr
	out, err := fc.Output()
	if err != nil {
		t.Fatalf("nodewright rollout --from-cluster: %v\n%s", err, out)
	}
	var tl rollout.Timeline
	if err := json.Unmarshal(out, &tl); err != nil {
		t.Fatalf("rollout -o json: %v\n%s", err, out)
	}
	// The forecast took its snapshot and ran from `from`; the pin is
	// applied now, so the real clock starts late by the forecast's own
	// run time, which shifts every window.
	pinAMI(t, s, "production", img.ID)
	shift := time.Since(from)
	if len(tl.Steps) != replicas || !tl.Finished || tl.PeakDisrupting != 1 {
		t.Fatalf("forecast: %d steps, finished %v, peak %d disrupted; want %d steps one at a time, finished (never: %+v)\n%s",
			len(tl.Steps), tl.Finished, tl.PeakDisrupting, replicas, tl.Never, out)
	}
	for i, st := range tl.Steps {
		t.Logf("forecast %d: %s %s (%s) start +%s done +%s", i, st.Method, st.NodeClaim, st.Node, st.Start.Sub(from), st.Done.Sub(from))
	}

	// Every node drifts away; each execution must finish.
	eventually(t, s, 4*time.Minute, "every drifted node replaced", func(ctx context.Context, st stack.Status) bool {
		images := nodeImages(s, nodeList(t, s))
		if len(images) != replicas {
			return false
		}
		for _, id := range images {
			if id != img.ID {
				return false
			}
		}
		return true
	})
	for _, claim := range oldClaims {
		finishedExecution(t, s, "drift-"+claim+"-", 30*time.Second)
	}
	execs := map[string]stack.Execution{}
	for _, e := range s.Executions() {
		if m := driftExecution.FindStringSubmatch(e.Name); m != nil {
			execs[m[1]] = e
		}
	}
	logDriftTimeline(t, from, s.Executions())
	slack := poll + boot
	for i, st := range tl.Steps {
		e, ok := execs[st.NodeClaim]
		if !ok {
			t.Errorf("forecast %d replaces NodeClaim %s; no drift execution replaced it (executions %+v)", i, st.NodeClaim, s.Executions())
			continue
		}
		late := slack + time.Duration(i)*poll
		earliest, latestStart, latestDone := st.Start.Add(shift-poll), st.Start.Add(shift+late), st.Done.Add(shift+late)
		t.Logf("replacement %d %s: started +%s (window +%s..+%s), finished +%s (forecast done +%s, latest +%s)", i, st.NodeClaim,
			e.Started.Sub(from), earliest.Sub(from), latestStart.Sub(from), e.Finished.Sub(from), st.Done.Add(shift).Sub(from), latestDone.Sub(from))
		if e.Status != "SUCCEEDED" {
			t.Errorf("%s: %s %s %s", e.Name, e.Status, e.Error, e.Cause)
		}
		if e.Started.Before(earliest) || e.Started.After(latestStart) {
			t.Errorf("replacement %d (%s) started at +%s, outside its forecast window +%s..+%s", i, st.NodeClaim, e.Started.Sub(from), earliest.Sub(from), latestStart.Sub(from))
		}
		if e.Finished.After(latestDone) {
			t.Errorf("replacement %d (%s) finished at +%s, after its forecast done +%s with the tolerance (+%s)", i, st.NodeClaim, e.Finished.Sub(from), st.Done.Add(shift).Sub(from), latestDone.Sub(from))
		}
	}
	if len(execs) != len(tl.Steps) {
		t.Errorf("%d drift executions ran; the forecast has %d replacements", len(execs), len(tl.Steps))
	}
}
