package workflow_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodewright/nodewright/shared/workflow"
)

// TestInterruptionInputJSON pins the field names the interruption state
// machine's ASL reads.
func TestInterruptionInputJSON(t *testing.T) {
	deadline := time.Date(2026, 3, 14, 9, 28, 53, 0, time.UTC)
	tests := []struct {
		name string
		give workflow.InterruptionInput
		want string
	}{
		{
			name: "should name every field as the state machine reads it",
			give: workflow.InterruptionInput{NodeClaim: "default-x7k2p", Node: "ip-10-0-1-23.us-west-2.compute.internal",
				InstanceID: "i-0b8f7e6d5c4a39281", Reason: "spot_interrupted", EventID: "4f1c8f0e", Deadline: deadline},
			want: `{"nodeClaim":"default-x7k2p","node":"ip-10-0-1-23.us-west-2.compute.internal","instanceID":"i-0b8f7e6d5c4a39281","reason":"spot_interrupted","eventID":"4f1c8f0e","deadline":"2026-03-14T09:28:53Z"}`,
		},
		{
			name: "should leave out the node of a NodeClaim that never registered",
			give: workflow.InterruptionInput{NodeClaim: "default-x7k2p", InstanceID: "i-0b8f7e6d5c4a39281",
				Reason: "instance_terminated", EventID: "4f1c8f0e", Deadline: deadline},
			want: `{"nodeClaim":"default-x7k2p","instanceID":"i-0b8f7e6d5c4a39281","reason":"instance_terminated","eventID":"4f1c8f0e","deadline":"2026-03-14T09:28:53Z"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.give)
			if err != nil {
				t.Fatalf("Marshal() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Marshal() mismatch (-want +got):\n%s", diff)
			}
			var back workflow.InterruptionInput
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatalf("Unmarshal() error = %v", err)
			}
			if diff := cmp.Diff(tt.give, back); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
