package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodewright/nodewright/local/meter"
	"github.com/nodewright/nodewright/local/stepfunctions"
)

// MeterFile is the file under Options.Dir where a running stack writes its
// meter (meter.Report as JSON) every MeterInterval, for `nodewright local
// status` in another process.
const MeterFile = "meter.json"

// MeterInterval is how often the stack rewrites MeterFile.
const MeterInterval = 5 * time.Second

// Metered returns what the stand-ins would have billed since Up: every
// request by service and API (local/meter).
func (s *Stack) Metered() meter.Report { return s.meter.Report(time.Now()) }

// writeMeter rewrites MeterFile every MeterInterval, and once more when ctx
// ends.
func (s *Stack) writeMeter(ctx context.Context) error {
	t := time.NewTicker(MeterInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = writeMeterFile(s.opts.Dir, s.Metered())
			return ctx.Err()
		case <-t.C:
			if err := writeMeterFile(s.opts.Dir, s.Metered()); err != nil {
				s.log.Warn("meter file", "err", err)
			}
		}
	}
}

func writeMeterFile(dir string, rep meter.Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("meter: %w", err)
	}
	tmp := filepath.Join(dir, MeterFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("meter: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, MeterFile)); err != nil {
		return fmt.Errorf("meter: %w", err)
	}
	return nil
}

// ReadMeter reads the meter a running stack in dir last wrote.
func ReadMeter(dir string) (meter.Report, error) {
	data, err := os.ReadFile(filepath.Join(dir, MeterFile))
	if err != nil {
		return meter.Report{}, fmt.Errorf("meter: %w", err)
	}
	var rep meter.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return meter.Report{}, fmt.Errorf("meter %s: %w", dir, err)
	}
	return rep, nil
}

// transitions counts the state transitions Step Functions standard bills
// for an execution's history: each state entered, and each retry (a retry
// enters the state again).
func transitions(events []stepfunctions.Event) int {
	n := 0
	for _, e := range events {
		if e.Type == "StateEntered" || e.Type == "StateRetried" {
			n++
		}
	}
	return n
}

// machineName is the name of the state machine of ARN
// arn:aws:states:<region>:<account>:stateMachine:<name>.
func machineName(arn string) string {
	_, name, ok := strings.Cut(arn, ":stateMachine:")
	if !ok {
		return arn
	}
	return name
}

// route is an API path without its IDs: its first two segments
// (/v1/batches/abc -> /v1/batches).
func route(path string) string {
	parts := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 3)
	if len(parts) > 2 {
		parts = parts[:2]
	}
	return "/" + strings.Join(parts, "/")
}
