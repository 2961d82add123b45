package handler_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/functions/disrupttask/handler"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/workflow"
)

// scripted is a service whose steps answer the outputs it holds.
type scripted struct {
	recorder
	launch    workflow.LaunchOutput
	readiness workflow.ReadinessOutput
	begin     workflow.NodesOutput
	drain     workflow.DrainOutput
}

func (s *scripted) LaunchReplacements(context.Context, workflow.DisruptionState, time.Time) (workflow.LaunchOutput, error) {
	return s.launch, nil
}
func (s *scripted) CheckReplacements(context.Context, workflow.DisruptionState, time.Time) (workflow.ReadinessOutput, error) {
	return s.readiness, nil
}
func (s *scripted) BeginTermination(context.Context, workflow.DisruptionState, time.Time) (workflow.NodesOutput, error) {
	return s.begin, nil
}
func (s *scripted) Drain(context.Context, workflow.DisruptionState, time.Time) (workflow.DrainOutput, error) {
	return s.drain, nil
}

// events is an EventRecorder that keeps the records by ID, as the table
// does (a write of the same ID replaces the record), and counts writes.
type events struct {
	mu     sync.Mutex
	byID   map[string]ddbstore.Event
	writes int
	err    error
}

func (e *events) PutEvent(_ context.Context, ev ddbstore.Event, _ time.Time, ttl time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.writes++
	if e.err != nil {
		return e.err
	}
	if ttl != ddbstore.EventTTL {
		return errors.New("ttl is not EventTTL")
	}
	if e.byID == nil {
		e.byID = map[string]ddbstore.Event{}
	}
	e.byID[ev.ID] = ev
	return nil
}

// event is a record reduced to what the tests check.
type event struct {
	ID, Type, Reason, Message, NodeClaim, Node, Pod, PodUID string
}

func (e *events) list() []event {
	var out []event
	for _, r := range e.byID {
		out = append(out, event{ID: r.ID, Type: r.Type, Reason: r.Reason, Message: r.Message, NodeClaim: r.NodeClaim, Node: r.Node, Pod: r.Pod, PodUID: r.PodUID})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

const execName = "drift-default-a-1234abcd"

func TestStepsRecordKarpentersEvents(t *testing.T) {
	deadline := time.Date(2030, 1, 2, 4, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		method string
		step   string
		svc    scripted
		want   []event
	}{
		{
			name: "should record DisruptionLaunching on each replacement", method: workflow.MethodDrifted, step: workflow.StepLaunchReplacements,
			svc: scripted{launch: workflow.LaunchOutput{Replacements: []workflow.ReplacementStatus{{NodeClaim: "default-r1", Status: "Launched"}}}},
			want: []event{{ID: execName + ":DisruptionLaunching:default-r1", Type: "Normal", Reason: "DisruptionLaunching",
				Message: "Launching NodeClaim: Drifted", NodeClaim: "default-r1"}},
		},
		{
			name: "should record DisruptionWaitingReadiness on each replacement not initialized", method: workflow.MethodUnderutilized,
			step: workflow.StepCheckReplacements,
			svc: scripted{readiness: workflow.ReadinessOutput{Replacements: []workflow.ReplacementStatus{
				{NodeClaim: "default-r1", Status: "Registered"}, {NodeClaim: "default-r2", Status: "Initialized"}}}},
			want: []event{{ID: execName + ":DisruptionWaitingReadiness:default-r1", Type: "Normal", Reason: "DisruptionWaitingReadiness",
				Message: "Waiting on readiness to continue disruption", NodeClaim: "default-r1"}},
		},
		{
			name: "should record nothing once the replacements are ready", method: workflow.MethodUnderutilized, step: workflow.StepCheckReplacements,
			svc: scripted{readiness: workflow.ReadinessOutput{Ready: true, Replacements: []workflow.ReplacementStatus{{NodeClaim: "default-r1", Status: "Initialized"}}}},
		},
		{
			name: "should record DisruptionTerminating on each candidate's Node and NodeClaim", method: workflow.MethodEmpty,
			step: workflow.StepBeginTermination,
			svc:  scripted{begin: workflow.NodesOutput{Nodes: []workflow.NodeOutcome{{NodeClaim: "default-a", Node: "node-a", Outcome: "deleting"}}}},
			want: []event{
				{ID: execName + ":DisruptionTerminating:node:node-a", Type: "Normal", Reason: "DisruptionTerminating",
					Message: "Disrupting Node: Empty", NodeClaim: "default-a", Node: "node-a"},
				{ID: execName + ":DisruptionTerminating:nodeclaim:default-a", Type: "Normal", Reason: "DisruptionTerminating",
					Message: "Disrupting Node: Empty", NodeClaim: "default-a"},
			},
		},
		{
			name: "should leave the disruption queue's events out of an interruption", method: workflow.MethodInterrupted,
			step: workflow.StepBeginTermination,
			svc:  scripted{begin: workflow.NodesOutput{Nodes: []workflow.NodeOutcome{{NodeClaim: "default-a", Node: "node-a"}}}},
		},
		{
			name: "should record Evicted on every evicted pod, listed or not, and nothing on the others", method: workflow.MethodInterrupted,
			step: workflow.StepDrain,
			svc: scripted{drain: workflow.DrainOutput{Round: 1, Nodes: []workflow.NodeDrain{{NodeClaim: "default-a", Node: "node-a",
				Pods: []workflow.PodAction{
					{Pod: "shop/web-1", Action: workflow.PodEvicted, UID: "uid-1"},
					{Pod: "shop/web-2", Action: workflow.PodTerminating, UID: "uid-2"},
					{Pod: "kube-system/agent", Action: workflow.PodWaitingTier, UID: "uid-3"},
				},
				Unlisted: []workflow.PodAction{{Pod: "shop/web-4", Action: workflow.PodEvicted, UID: "uid-4"}},
			}}}},
			want: []event{
				{ID: execName + ":Evicted:uid-1", Type: "Normal", Reason: "Evicted", Message: "Evicted pod: node node-a is being disrupted (Interrupted)",
					NodeClaim: "default-a", Node: "node-a", Pod: "shop/web-1", PodUID: "uid-1"},
				{ID: execName + ":Evicted:uid-4", Type: "Normal", Reason: "Evicted", Message: "Evicted pod: node node-a is being disrupted (Interrupted)",
					NodeClaim: "default-a", Node: "node-a", Pod: "shop/web-4", PodUID: "uid-4"},
			},
		},
		{
			name: "should record FailedDraining once a round with refused evictions makes no progress", method: workflow.MethodDrifted,
			step: workflow.StepDrain,
			svc: scripted{drain: workflow.DrainOutput{Round: 4, Stalls: 2, Nodes: []workflow.NodeDrain{{NodeClaim: "default-a", Node: "node-a",
				Counts: map[string]int{workflow.PodEvictionBlocked: 1},
				Pods: []workflow.PodAction{{Pod: "shop/db-0", Action: workflow.PodEvictionBlocked, UID: "uid-db",
					Detail: "Cannot evict pod as it would violate the pod's disruption budget."}},
			}}}},
			want: []event{{ID: execName + ":FailedDraining:default-a:c0:r3", Type: "Warning", Reason: "FailedDraining",
				Message:   "Failed to drain node, 1 pod(s) could not be evicted: shop/db-0: Cannot evict pod as it would violate the pod's disruption budget.",
				NodeClaim: "default-a", Node: "node-a"}},
		},
		{
			name: "should not record FailedDraining for a refusal in a round that made progress", method: workflow.MethodDrifted,
			step: workflow.StepDrain,
			svc: scripted{drain: workflow.DrainOutput{Round: 1, Nodes: []workflow.NodeDrain{{NodeClaim: "default-a", Node: "node-a",
				Counts: map[string]int{workflow.PodEvictionBlocked: 1},
				Pods:   []workflow.PodAction{{Pod: "shop/db-0", Action: workflow.PodEvictionBlocked, UID: "uid-db", Detail: "pdb"}},
			}}}},
		},
		{
			name:   "should record Disrupted on a pod deleted at the deadline and TerminationGracePeriodExpiring on its Node",
			method: workflow.MethodDrifted, step: workflow.StepDrain,
			svc: scripted{drain: workflow.DrainOutput{Round: 9, Nodes: []workflow.NodeDrain{{NodeClaim: "default-a", Node: "node-a", Deadline: &deadline,
				Pods: []workflow.PodAction{{Pod: "shop/db-0", Action: workflow.PodDeleted, UID: "uid-db", GraceSeconds: 30, PodGraceSeconds: 300}},
			}}}},
			want: []event{
				{ID: execName + ":Disrupted:uid-db", Type: "Normal", Reason: "Disrupted",
					Message:   "Deleting the pod to meet the termination deadline 2030-01-02T04:00:00Z of node node-a: granted 30 s of its 300 s terminationGracePeriodSeconds, bypassing its PodDisruptionBudget and the do-not-disrupt annotation",
					NodeClaim: "default-a", Node: "node-a", Pod: "shop/db-0", PodUID: "uid-db"},
				{ID: execName + ":TerminationGracePeriodExpiring:default-a", Type: "Warning", Reason: "TerminationGracePeriodExpiring",
					Message: "All pods will be deleted by 2030-01-02T04:00:00Z", NodeClaim: "default-a", Node: "node-a"},
			},
		},
		{
			name: "should record AwaitingVolumeDetachment while the Node's volumes are attached", method: workflow.MethodDrifted,
			step: workflow.StepDrain,
			svc: scripted{drain: workflow.DrainOutput{Round: 2, Nodes: []workflow.NodeDrain{{NodeClaim: "default-a", Node: "node-a",
				Volumes: &workflow.VolumeDetachment{Status: workflow.VolumesAwaitingDetachment, Remaining: 1, Attachments: []string{"csi-1 (pv-1)"}},
			}}}},
			want: []event{{ID: execName + ":AwaitingVolumeDetachment:default-a", Type: "Normal", Reason: "AwaitingVolumeDetachment",
				Message: "Awaiting deletion of 1 bound VolumeAttachment(s) (csi-1 (pv-1))", NodeClaim: "default-a", Node: "node-a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &events{}
			svc := tt.svc
			h, err := handler.NewWithService(&svc, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return t0 })
			if err != nil {
				t.Fatal(err)
			}
			h.WithEvents(rec)
			in := workflow.TaskInput{Step: tt.step, State: workflow.DisruptionState{
				DisruptionInput: workflow.DisruptionInput{ID: execName, Method: tt.method}}}
			// A retried step records the same events again, under the same
			// IDs.
			for range 2 {
				if _, err := h.Handle(t.Context(), in); err != nil {
					t.Fatalf("Handle() error = %v", err)
				}
			}
			if diff := cmp.Diff(tt.want, rec.list()); diff != "" {
				t.Errorf("event records mismatch (-want +got):\n%s", diff)
			}
			for _, r := range rec.byID {
				if !r.Time.Equal(t0) {
					t.Errorf("record %s at %v, want the step's time %v", r.ID, r.Time, t0)
				}
			}
		})
	}
}

func TestStepSucceedsWhenItsEventsCannotBeRecorded(t *testing.T) {
	rec := &events{err: errors.New("ProvisionedThroughputExceededException")}
	svc := &scripted{begin: workflow.NodesOutput{Nodes: []workflow.NodeOutcome{{NodeClaim: "default-a", Node: "node-a"}}}}
	h, err := handler.NewWithService(svc, slog.New(slog.NewTextHandler(io.Discard, nil)), func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	h.WithEvents(rec)
	out, err := h.Handle(t.Context(), workflow.TaskInput{Step: workflow.StepBeginTermination,
		State: workflow.DisruptionState{DisruptionInput: workflow.DisruptionInput{ID: execName, Method: workflow.MethodDrifted}}})
	if err != nil {
		t.Fatalf("Handle() error = %v, want the step's success", err)
	}
	if diff := cmp.Diff(svc.begin, out); diff != "" {
		t.Errorf("Handle() output mismatch (-want +got):\n%s", diff)
	}
	if rec.writes != 2 {
		t.Errorf("event writes tried = %d, want 2 (Node and NodeClaim)", rec.writes)
	}
}
