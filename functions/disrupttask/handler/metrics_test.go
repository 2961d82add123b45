package handler_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nodewright/nodewright/functions/disrupttask/handler"
	"github.com/nodewright/nodewright/functions/internal/decisionmetrics"
	"github.com/nodewright/nodewright/shared/workflow"
)

// drainer is a service whose drain rounds return out.
type drainer struct {
	recorder
	out workflow.DrainOutput
}

func (d *drainer) Drain(_ context.Context, _ workflow.DisruptionState, _ time.Time) (workflow.DrainOutput, error) {
	return d.out, nil
}

// nullStore stores nothing; the first-eviction series is CloudWatch-only.
type nullStore struct{}

func (nullStore) AddCounter(context.Context, string, map[string]string, float64) error { return nil }
func (nullStore) SetGauge(context.Context, string, map[string]string, float64) error   { return nil }
func (nullStore) Observe(context.Context, string, map[string]string, float64) error    { return nil }

func TestDrainObservesTheInterruptionsTimeToFirstEviction(t *testing.T) {
	evicted := []workflow.NodeDrain{{NodeClaim: "default-abc", Node: "ip-10-0-0-1", Counts: map[string]int{workflow.PodEvicted: 2}}}
	interrupted := &workflow.InterruptionInput{NodeClaim: "default-abc", Reason: "spot_interrupted", EventTime: t0.Add(-42 * time.Second)}
	for _, tc := range []struct {
		name  string
		st    workflow.DisruptionState
		out   workflow.DrainOutput
		wants bool
	}{
		{"should observe the first round that evicted a pod", workflow.DisruptionState{Interruption: interrupted}, workflow.DrainOutput{Round: 1, Nodes: evicted}, true},
		{"should observe a first round that force-deleted a pod", workflow.DisruptionState{Interruption: interrupted},
			workflow.DrainOutput{Round: 1, Nodes: []workflow.NodeDrain{{Counts: map[string]int{workflow.PodDeleted: 1}}}}, true},
		{"should not observe a later round", workflow.DisruptionState{Interruption: interrupted}, workflow.DrainOutput{Round: 2, Nodes: evicted}, false},
		{"should not observe a first round that moved no pod", workflow.DisruptionState{Interruption: interrupted},
			workflow.DrainOutput{Round: 1, Nodes: []workflow.NodeDrain{{Counts: map[string]int{workflow.PodEvictionBlocked: 1}}}}, false},
		{"should not observe a voluntary disruption", workflow.DisruptionState{}, workflow.DrainOutput{Round: 1, Nodes: evicted}, false},
		{"should not observe an interruption without its event time", workflow.DisruptionState{Interruption: &workflow.InterruptionInput{Reason: "spot_interrupted"}},
			workflow.DrainOutput{Round: 1, Nodes: evicted}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var emf bytes.Buffer
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			h, err := handler.NewWithService(&drainer{out: tc.out}, log, func() time.Time { return t0 })
			if err != nil {
				t.Fatal(err)
			}
			h.WithMetrics(decisionmetrics.New(nullStore{}, &emf, log, "prod", func() time.Time { return t0 }))
			if _, err := h.Handle(t.Context(), workflow.TaskInput{Step: workflow.StepDrain, State: tc.st}); err != nil {
				t.Fatal(err)
			}
			got := strings.Contains(emf.String(), `"nodewright_interruption_first_eviction_seconds":42`)
			if got != tc.wants {
				t.Errorf("observed 42 s = %v, want %v; EMF:\n%s", got, tc.wants, emf.String())
			}
			if tc.wants && !strings.Contains(emf.String(), `"message_type":"spot_interrupted"`) {
				t.Errorf("EMF lacks the interruption kind:\n%s", emf.String())
			}
		})
	}
}
