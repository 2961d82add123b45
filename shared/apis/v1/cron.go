package v1

import (
	"fmt"
	"strings"

	"github.com/robfig/cron/v3"
)

// ParseBudgetSchedule parses a disruption budget's schedule exactly as the
// disruption evaluation reads it: the standard five-field cron syntax
// (minute hour day-of-month month day-of-week; lists, ranges, steps, "*" and
// "?", month and weekday names case-insensitive) or an "@" shorthand, in
// UTC. It follows Karpenter's Budget.IsActive, which parses
// "TZ=UTC <schedule>" with robfig/cron's standard parser: a schedule that
// carries its own CRON_TZ= or TZ= prefix cannot be evaluated there, so it is
// refused here with an error saying so. Validation and evaluation both call
// it; the returned Schedule's Next works in UTC.
func ParseBudgetSchedule(s string) (cron.Schedule, error) {
	if f := strings.Fields(s); len(f) > 0 && (strings.HasPrefix(f[0], "CRON_TZ=") || strings.HasPrefix(f[0], "TZ=")) {
		return nil, fmt.Errorf("time zone prefix %q is not supported: budget schedules are evaluated in UTC", f[0])
	}
	sched, err := cron.ParseStandard("TZ=UTC " + s)
	if err != nil {
		return nil, err
	}
	return sched, nil
}
