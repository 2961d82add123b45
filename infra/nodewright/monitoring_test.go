package nodewright

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The state machines' failure alarms leave ExecutionsTimedOut out because no
// machine has an execution timeout; one that gets one must be alarmed on it.
func TestStateMachinesHaveNoExecutionTimeout(t *testing.T) {
	files, err := readStateMachines(filepath.Join("..", "..", "statemachines"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no state machine files: the check checked nothing")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(raw, &top); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"TimeoutSeconds", "TimeoutSecondsPath"} {
			if _, ok := top[k]; ok {
				t.Errorf("%s has an execution timeout (%s): add ExecutionsTimedOut to its FailedExecutionsAlarm (monitoring.go)", f.path, k)
			}
		}
	}
}
