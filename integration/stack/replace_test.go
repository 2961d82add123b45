package stack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/intake"
	"github.com/nodewright/nodewright/local/stack"
	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/workflow"
)

// TestReplaceProtectedNode replaces by hand, through POST /v1/replacements
// as `nodewright replace` sends it (SigV4-signed by the intake client), the
// node of a do-not-disrupt pod in a NodePool whose budget is zero and that
// has no terminationGracePeriod: the node automatic disruption must never
// touch. A dry run starts nothing; the request starts manual-<nodeclaim>-
// <hash>, which launches the replacement first, drains the pod through the
// Eviction API onto it and removes the old node; the execution is visible
// with its history and the operator's identity; the same request again
// starts no second execution.
func TestReplaceProtectedNode(t *testing.T) {
	s := startStack(t, func(o *stack.Options) { o.Disruption = true })
	if !s.Wired().Drift {
		t.Skip("manual replacement needs the local Step Functions engine (make sfn-deps)")
	}
	ctx := t.Context()
	applyGuide(t, s, "ec2nodeclass.yaml")
	if err := s.Apply(ctx, poolYAML("protected", "0", "")); err != nil {
		t.Fatal(err)
	}
	d := deployment("db", 1, "500m", "512Mi")
	d.Spec.Template.Annotations = map[string]string{v1.AnnotationDoNotDisrupt: "true"}
	if _, err := s.Kube.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, s, 3*time.Minute, "the do-not-disrupt pod Running on its node", func(ctx context.Context, st stack.Status) bool {
		return st.RunningPods == 1 && st.PendingPods == 0 && st.ReadyNodes == 1
	})
	pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=db"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("db pods: %v, err %v", pods, err)
	}
	old, err := s.Kube.CoreV1().Nodes().Get(ctx, pods.Items[0].Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := claimOfNode(t, s, []corev1.Node{*old})[old.Name]

	client, err := intake.New(intake.Options{Endpoint: s.IntakeURL, Region: s.Region,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDOPERATOR", "secret", ""), MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	req := &v1.ReplacementRequest{APIVersion: v1.APIVersion, Kind: v1.KindReplacementRequest, Nodes: []string{old.Name}, DryRun: true}
	// The forwarder's snapshot may lag the pod by a few seconds.
	var dry v1.ReplacementResult
	end := time.Now().Add(time.Minute)
	for {
		dry, err = client.PostReplacement(ctx, req)
		if err == nil && len(dry.Nodes) == 1 && len(dry.Nodes[0].DoNotDisrupt) == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("dry run: %+v, %v; want node %s planned with its do-not-disrupt pod", dry, err, old.Name)
		}
		time.Sleep(time.Second)
	}
	if n := dry.Nodes[0]; !dry.DryRun || n.Started || !strings.HasPrefix(n.Execution, "manual-"+claim+"-") || len(dry.Budgets) == 0 {
		t.Errorf("dry run = %+v, want execution manual-%s-<hash> not started, budgets reported", dry, claim)
	}
	for _, e := range s.Executions() {
		if strings.HasPrefix(e.Name, "manual-") {
			t.Fatalf("the dry run started %s", e.Name)
		}
	}

	req.DryRun = false
	res, err := client.PostReplacement(ctx, req)
	if err != nil {
		t.Fatalf("replace: %v", err)
	}
	if len(res.Nodes) != 1 || !res.Nodes[0].Started || res.Nodes[0].Execution != dry.Nodes[0].Execution ||
		res.RequestedBy != "arn:aws:iam::111122223333:user/AKIDOPERATOR" {
		t.Fatalf("replace = %+v, want %s started for the signing caller", res, dry.Nodes[0].Execution)
	}
	// The CLI retried (or the operator ran it again): nothing new starts.
	again, err := client.PostReplacement(ctx, req)
	if err != nil || len(again.Nodes) != 1 || again.Nodes[0].Execution != res.Nodes[0].Execution || !again.Nodes[0].AlreadyExisted {
		t.Errorf("repeated replace = %+v, %v; want the same execution, already existing", again, err)
	}

	exec, ok := finishedExecution(t, s, res.Nodes[0].Execution, 5*time.Minute)
	if !ok {
		t.Fatalf("execution %s did not finish (executions %+v)", res.Nodes[0].Execution, s.Executions())
	}
	if exec.Status != "SUCCEEDED" {
		t.Fatalf("execution %s: %s %s %s", exec.Name, exec.Status, exec.Error, exec.Cause)
	}
	n := 0
	for _, e := range s.Executions() {
		if strings.HasPrefix(e.Name, "manual-") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d manual executions, want 1", n)
	}
	// Its history: launched first, then drained, with the operator's
	// identity in its input.
	var states []string
	var input workflow.DisruptionState
	for _, ev := range exec.History {
		if ev.Type == "StateEntered" && ev.State != nil {
			states = append(states, ev.State.Name)
			if input.ID == "" {
				_ = json.Unmarshal(ev.State.Input, &input)
			}
		}
	}
	joined := strings.Join(states, ",")
	if i, j := strings.Index(joined, "LaunchReplacements"), strings.Index(joined, "Drain"); i < 0 || j < 0 || i > j {
		t.Errorf("states entered %v, want LaunchReplacements before Drain", states)
	}
	if input.Manual == nil || input.Manual.RequestedBy != res.RequestedBy || input.Method != workflow.MethodManual {
		t.Errorf("execution input = %+v, want the Manual request of %s", input.DisruptionInput, res.RequestedBy)
	}

	eventually(t, s, 2*time.Minute, "the db pod Running on the replacement node", func(ctx context.Context, st stack.Status) bool {
		pods, err := s.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=db"})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		p := pods.Items[0]
		return p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Spec.NodeName != old.Name
	})
	if _, err := s.Kube.CoreV1().Nodes().Get(ctx, old.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("node %s still exists after its replacement", old.Name)
	}
}
