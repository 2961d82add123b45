package termination_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodewright/nodewright/shared/kube"
	"github.com/nodewright/nodewright/shared/termination"
	"github.com/nodewright/nodewright/shared/workflow"
)

type plannedStep struct {
	Pod    string
	Tier   int
	Action string
	Grace  time.Duration
}

func TestPlanDrain(t *testing.T) {
	deadline := t0.Add(time.Hour)
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0.Add(-10 * time.Second)} }
	tests := []struct {
		name              string
		pods              []*corev1.Pod
		now               time.Time
		deadline          *time.Time
		evictDoNotDisrupt bool
		want              []plannedStep
	}{
		{
			name: "should evict non-critical pods before DaemonSet pods and both before critical pods",
			pods: []*corev1.Pod{
				pod("kube-system", "coredns", "n", critical), pod("kube-system", "agent", "n", daemonSet),
				pod("default", "web", "n"), pod("kube-system", "cni", "n", daemonSet, critical),
			},
			now: t0,
			want: []plannedStep{
				{Pod: "default/web", Tier: 1, Action: workflow.PodEvicted},
				{Pod: "kube-system/agent", Tier: 2, Action: workflow.PodWaitingTier},
				{Pod: "kube-system/coredns", Tier: 3, Action: workflow.PodWaitingTier},
				{Pod: "kube-system/cni", Tier: 4, Action: workflow.PodWaitingTier},
			},
		},
		{
			name: "should evict the DaemonSet tier once the first tier is gone",
			pods: []*corev1.Pod{pod("kube-system", "agent", "n", daemonSet), pod("kube-system", "coredns", "n", critical)},
			now:  t0,
			want: []plannedStep{
				{Pod: "kube-system/agent", Tier: 2, Action: workflow.PodEvicted},
				{Pod: "kube-system/coredns", Tier: 3, Action: workflow.PodWaitingTier},
			},
		},
		{
			name: "should never evict pods that tolerate karpenter.sh/disrupted:NoSchedule",
			pods: []*corev1.Pod{pod("kube-system", "everywhere", "n", daemonSet, toleratesDisrupted)},
			now:  t0,
		},
		{
			name: "should wait for a pod with an active do-not-disrupt annotation",
			pods: []*corev1.Pod{pod("default", "batch", "n", doNotDisrupt), pod("default", "web", "n")},
			now:  t0,
			want: []plannedStep{
				{Pod: "default/batch", Tier: 1, Action: workflow.PodWaitingDoNotDisrupt},
				{Pod: "default/web", Tier: 1, Action: workflow.PodEvicted},
			},
		},
		{
			name:              "should evict do-not-disrupt pods on an interruption",
			pods:              []*corev1.Pod{pod("default", "batch", "n", doNotDisrupt)},
			now:               t0,
			evictDoNotDisrupt: true,
			want:              []plannedStep{{Pod: "default/batch", Tier: 1, Action: workflow.PodEvicted}},
		},
		{
			name: "should wait for a pod already terminating",
			pods: []*corev1.Pod{pod("default", "web", "n", terminating)},
			now:  t0,
			want: []plannedStep{{Pod: "default/web", Tier: 1, Action: workflow.PodTerminating}},
		},
		{
			name:     "should not force a pod before the deadline minus its grace period",
			pods:     []*corev1.Pod{pod("default", "db", "n", graceSeconds(300))},
			now:      t0.Add(55*time.Minute - time.Second),
			deadline: &deadline,
			want:     []plannedStep{{Pod: "default/db", Tier: 1, Action: workflow.PodEvicted}},
		},
		{
			name:     "should delete a PDB-blocked pod at T+55 min with terminationGracePeriod 1h and pod grace 300 s",
			pods:     []*corev1.Pod{pod("default", "db", "n", graceSeconds(300))},
			now:      t0.Add(55 * time.Minute),
			deadline: &deadline,
			want:     []plannedStep{{Pod: "default/db", Tier: 1, Action: workflow.PodDeleted, Grace: 300 * time.Second}},
		},
		{
			name:     "should force pods of every tier and do-not-disrupt pods at the deadline",
			pods:     []*corev1.Pod{pod("default", "batch", "n", doNotDisrupt, graceSeconds(30)), pod("kube-system", "agent", "n", daemonSet, graceSeconds(30))},
			now:      t0.Add(59*time.Minute + 40*time.Second),
			deadline: &deadline,
			want: []plannedStep{
				{Pod: "default/batch", Tier: 1, Action: workflow.PodDeleted, Grace: 20 * time.Second},
				{Pod: "kube-system/agent", Tier: 2, Action: workflow.PodDeleted, Grace: 20 * time.Second},
			},
		},
		{
			name:     "should clamp the grace period to at least one second past the deadline",
			pods:     []*corev1.Pod{pod("default", "web", "n")},
			now:      t0.Add(2 * time.Hour),
			deadline: &deadline,
			want:     []plannedStep{{Pod: "default/web", Tier: 1, Action: workflow.PodDeleted, Grace: time.Second}},
		},
		{
			name: "should not delete again a pod already terminating with a shorter grace period",
			pods: []*corev1.Pod{pod("default", "web", "n", func(p *corev1.Pod) {
				s := int64(5)
				p.DeletionTimestamp = &metav1.Time{Time: t0.Add(59*time.Minute + 20*time.Second)}
				p.DeletionGracePeriodSeconds = &s
			})},
			now:      t0.Add(59*time.Minute + 30*time.Second),
			deadline: &deadline,
			want:     []plannedStep{{Pod: "default/web", Tier: 1, Action: workflow.PodTerminating}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pods []corev1.Pod
			for _, p := range tt.pods {
				pods = append(pods, *p)
			}
			var got []plannedStep
			for _, s := range termination.PlanDrain(kube.DrainOrder(pods, tt.now), tt.now, tt.deadline, tt.evictDoNotDisrupt, kube.DoNotDisrupt) {
				got = append(got, plannedStep{Pod: s.Pod.Namespace + "/" + s.Pod.Name, Tier: s.Tier, Action: s.Action, Grace: s.Grace})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanDrain() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// drainRound is what a test expects after one Drain call.
type drainRound struct {
	drained   bool
	stalls    int
	nextPoll  int
	remaining []string // pods left on node-a
	counts    map[string]int
}

func TestDrainRounds(t *testing.T) {
	tests := []struct {
		name    string
		objects []runtime.Object
		claim   func(*termination.Claim)
		tgp     time.Duration
		blocked map[string]string
		method  string
		// forceAfter is a Manual execution's ForceAfterSeconds.
		forceAfter int
		nows       []time.Duration // offsets from t0, one per round
		want       []drainRound
	}{
		{
			name: "should drain tier by tier, one tier per round",
			objects: []runtime.Object{node("node-a"), pod("default", "web", "node-a"), pod("kube-system", "agent", "node-a", daemonSet),
				pod("kube-system", "coredns", "node-a", critical), pod("kube-system", "everywhere", "node-a", daemonSet, toleratesDisrupted)},
			nows: []time.Duration{0, 5 * time.Second, 10 * time.Second, 15 * time.Second},
			want: []drainRound{
				{nextPoll: 5, remaining: []string{"kube-system/agent", "kube-system/coredns", "kube-system/everywhere"}, counts: map[string]int{"Evicted": 1, "WaitingForEarlierTier": 2}},
				{nextPoll: 5, remaining: []string{"kube-system/coredns", "kube-system/everywhere"}, counts: map[string]int{"Evicted": 1, "WaitingForEarlierTier": 1}},
				{nextPoll: 5, remaining: []string{"kube-system/everywhere"}, counts: map[string]int{"Evicted": 1}},
				{drained: true, nextPoll: 5, remaining: []string{"kube-system/everywhere"}},
			},
		},
		{
			name:    "should retry a PDB-blocked pod with backoff and keep the node draining without terminationGracePeriod",
			objects: []runtime.Object{node("node-a"), pod("default", "db", "node-a")},
			blocked: map[string]string{"default/db": "default/db-pdb"},
			nows:    []time.Duration{0, 5 * time.Second, 15 * time.Second, 35 * time.Second, 75 * time.Second, 24 * time.Hour},
			want: []drainRound{
				{stalls: 1, nextPoll: 10, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{stalls: 2, nextPoll: 20, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{stalls: 3, nextPoll: 40, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{stalls: 4, nextPoll: 60, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{stalls: 5, nextPoll: 60, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{stalls: 6, nextPoll: 60, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
			},
		},
		{
			name:    "should delete a PDB-blocked pod at the termination deadline minus its grace period",
			objects: []runtime.Object{node("node-a"), pod("default", "db", "node-a", graceSeconds(300))},
			blocked: map[string]string{"default/db": "default/db-pdb"},
			tgp:     time.Hour,
			nows:    []time.Duration{0, 55 * time.Minute, 55*time.Minute + 5*time.Second},
			want: []drainRound{
				{stalls: 1, nextPoll: 10, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{nextPoll: 5, counts: map[string]int{"Deleted": 1}},
				{drained: true, nextPoll: 5},
			},
		},
		{
			name:    "should cut a PDB-blocked pod's backoff short to delete it at the termination deadline minus its grace period",
			objects: []runtime.Object{node("node-a"), pod("default", "db", "node-a", graceSeconds(5))},
			blocked: map[string]string{"default/db": "default/db-pdb"},
			tgp:     time.Minute,
			nows:    []time.Duration{0, 10 * time.Second, 30 * time.Second, 55 * time.Second, 56 * time.Second},
			want: []drainRound{
				{stalls: 1, nextPoll: 10, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{stalls: 2, nextPoll: 20, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{stalls: 3, nextPoll: 25, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{nextPoll: 5, counts: map[string]int{"Deleted": 1}},
				{drained: true, nextPoll: 5},
			},
		},
		{
			name:    "should wait for a do-not-disrupt pod on a graceful command",
			objects: []runtime.Object{node("node-a"), pod("default", "batch", "node-a", doNotDisrupt)},
			nows:    []time.Duration{0},
			want:    []drainRound{{stalls: 1, nextPoll: 10, remaining: []string{"default/batch"}, counts: map[string]int{"WaitingDoNotDisrupt": 1}}},
		},
		{
			name:    "should evict a do-not-disrupt pod on an interruption",
			objects: []runtime.Object{node("node-a"), pod("default", "batch", "node-a", doNotDisrupt)},
			method:  workflow.MethodInterrupted,
			nows:    []time.Duration{0, time.Second},
			want: []drainRound{
				{nextPoll: 5, counts: map[string]int{"Evicted": 1}},
				{drained: true, nextPoll: 5},
			},
		},
		{
			name:    "should evict a do-not-disrupt pod on a manual replacement",
			objects: []runtime.Object{node("node-a"), pod("default", "db", "node-a", doNotDisrupt)},
			method:  workflow.MethodManual,
			nows:    []time.Duration{0, time.Second},
			want: []drainRound{
				{nextPoll: 5, counts: map[string]int{"Evicted": 1}},
				{drained: true, nextPoll: 5},
			},
		},
		{
			name:    "should honour a PDB past the terminationGracePeriod on a manual replacement without force-after",
			objects: []runtime.Object{node("node-a"), pod("default", "db", "node-a", doNotDisrupt)},
			blocked: map[string]string{"default/db": "default/db-pdb"},
			tgp:     time.Minute,
			method:  workflow.MethodManual,
			nows:    []time.Duration{0, 2 * time.Minute},
			want: []drainRound{
				{stalls: 1, nextPoll: 10, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{stalls: 2, nextPoll: 20, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
			},
		},
		{
			name:       "should delete a PDB-protected pod at force-after minus its grace period on a manual replacement",
			objects:    []runtime.Object{node("node-a"), pod("default", "db", "node-a", graceSeconds(5))},
			blocked:    map[string]string{"default/db": "default/db-pdb"},
			tgp:        time.Hour,
			method:     workflow.MethodManual,
			forceAfter: 60,
			nows:       []time.Duration{0, 30 * time.Second, 55 * time.Second, 56 * time.Second},
			want: []drainRound{
				{stalls: 1, nextPoll: 10, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{stalls: 2, nextPoll: 20, remaining: []string{"default/db"}, counts: map[string]int{"EvictionBlocked": 1}},
				{nextPoll: 5, counts: map[string]int{"Deleted": 1}},
				{drained: true, nextPoll: 5},
			},
		},
		{
			name:    "should report a node that is gone as drained",
			objects: nil,
			nows:    []time.Duration{0},
			want:    []drainRound{{drained: true, nextPoll: 5}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.objects...)
			for k, v := range tt.blocked {
				e.blocked[k] = v
			}
			method := tt.method
			if method == "" {
				method = workflow.MethodDrifted
			}
			c := nodeClaim("a", claimedBy(execID, method, t0.Add(time.Hour)))
			if tt.tgp > 0 {
				withTGP(tt.tgp)(&c)
			}
			e.claims.put(c)
			st := e.hold(state(method, 1, "a"))
			if method == workflow.MethodManual {
				st.Manual = &workflow.ManualRequest{RequestedBy: "arn:aws:iam::111122223333:user/ops", Nodes: []string{"node-a"}, ForceAfterSeconds: tt.forceAfter}
			}
			if method == workflow.MethodInterrupted {
				st.Candidates = nil
				st.Interruption = &workflow.InterruptionInput{NodeClaim: "a", Node: "node-a", InstanceID: "i-a", Deadline: t0.Add(2 * time.Minute)}
			}
			if _, err := e.svc.BeginTermination(t.Context(), st, t0); err != nil {
				t.Fatalf("BeginTermination() error = %v", err)
			}
			for i, off := range tt.nows {
				out, err := e.svc.Drain(t.Context(), st, t0.Add(off))
				if err != nil {
					t.Fatalf("round %d: Drain() error = %v", i+1, err)
				}
				got := drainRound{drained: out.Drained, stalls: out.Stalls, nextPoll: out.NextPollSeconds, remaining: e.pods(t, "node-a")}
				if len(out.Nodes) == 1 {
					got.counts = out.Nodes[0].Counts
				}
				if diff := cmp.Diff(tt.want[i], got, cmp.AllowUnexported(drainRound{})); diff != "" {
					t.Errorf("round %d mismatch (-want +got):\n%s", i+1, diff)
				}
				if out.Round != i+1 {
					t.Errorf("round %d: Round = %d", i+1, out.Round)
				}
				st.Drain = &out
			}
		})
	}
}

func TestDrainForcedDeletionUsesTheTimeLeft(t *testing.T) {
	e := newEnv(t, node("node-a"), pod("default", "db", "node-a", graceSeconds(300)))
	e.blocked["default/db"] = "default/db-pdb"
	e.claims.put(nodeClaim("a", claimedBy(execID, workflow.MethodDrifted, t0.Add(time.Hour)), withTGP(time.Hour)))
	st := e.hold(state(workflow.MethodDrifted, 1, "a"))
	if _, err := e.svc.BeginTermination(t.Context(), st, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Drain(t.Context(), st, t0.Add(57*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int64{"default/db": 180}, e.deletedPods()); diff != "" {
		t.Errorf("pod deletions (grace seconds) mismatch (-want +got):\n%s", diff)
	}
}

func TestDrainReportsWhatTheEventsNeed(t *testing.T) {
	e := newEnv(t, node("node-a"), pod("default", "db", "node-a", graceSeconds(300)), pod("default", "web", "node-a"))
	e.blocked["default/web"] = "default/web-pdb"
	e.claims.put(nodeClaim("a", claimedBy(execID, workflow.MethodDrifted, t0.Add(time.Hour)), withTGP(time.Hour)))
	st := e.hold(state(workflow.MethodDrifted, 1, "a"))
	if _, err := e.svc.BeginTermination(t.Context(), st, t0); err != nil {
		t.Fatal(err)
	}
	out, err := e.svc.Drain(t.Context(), st, t0.Add(57*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	type action struct {
		Pod, Action, UID       string
		Grace, PodGraceSeconds int64
	}
	var got []action
	for _, a := range out.Nodes[0].Pods {
		got = append(got, action{Pod: a.Pod, Action: a.Action, UID: a.UID, Grace: a.GraceSeconds, PodGraceSeconds: a.PodGraceSeconds})
	}
	want := []action{
		{Pod: "default/db", Action: workflow.PodDeleted, UID: "uid-db", Grace: 180, PodGraceSeconds: 300},
		{Pod: "default/web", Action: workflow.PodEvictionBlocked, UID: "uid-web", PodGraceSeconds: 30},
	}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b action) bool { return a.Pod < b.Pod })); diff != "" {
		t.Errorf("pod actions mismatch (-want +got):\n%s", diff)
	}
}

func TestDrainBoundsItsOutput(t *testing.T) {
	objects := []runtime.Object{node("node-a")}
	for i := range 80 {
		objects = append(objects, pod("default", "p"+string(rune('a'+i/26))+string(rune('a'+i%26)), "node-a"))
	}
	e := newEnv(t, objects...)
	e.claims.put(nodeClaim("a", claimedBy(execID, workflow.MethodDrifted, t0.Add(time.Hour))))
	out, err := e.svc.Drain(t.Context(), e.hold(state(workflow.MethodDrifted, 1, "a")), t0)
	if err != nil {
		t.Fatal(err)
	}
	if n := out.Nodes[0]; len(n.Pods) != 50 || n.Counts[workflow.PodEvicted] != 80 || !out.Truncated {
		t.Errorf("Drain() listed %d pods, counted %d evictions, truncated %v; want 50, 80, true", len(n.Pods), n.Counts[workflow.PodEvicted], out.Truncated)
	}
	if n := out.Nodes[0]; len(n.Unlisted) != 30 {
		t.Errorf("Drain() kept %d unlisted pod actions, want the other 30", len(n.Unlisted))
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "unlisted") || strings.Contains(string(data), "Unlisted") {
		t.Errorf("encoded drain output carries the unlisted pods: %.300s", data)
	}
}
