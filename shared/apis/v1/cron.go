package v1

import (
	"fmt"
	"strconv"
	"strings"
)

// cronDescriptors are the "@" shorthands a budget schedule may use
// (karpenter: pkg/apis/v1/nodepool.go schedule pattern).
var cronDescriptors = map[string]bool{
	"@annually": true, "@yearly": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

// cronField describes one of the five standard cron fields.
type cronField struct {
	name     string
	min, max int
	names    map[string]int
}

var cronFields = []cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}},
	{name: "day of week", min: 0, max: 6, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}},
}

// checkCron reports why s is not a schedule Karpenter accepts, or "" when it
// is. Karpenter parses budget schedules with the standard five-field cron
// syntax (minute hour day-of-month month day-of-week; lists, ranges, steps,
// "*" and "?", month and weekday names case-insensitive) or an "@" shorthand,
// optionally prefixed with "CRON_TZ=<zone>" or "TZ=<zone>"; the schedule is
// evaluated in UTC otherwise.
func checkCron(s string) string {
	fields := strings.Fields(s)
	if len(fields) > 0 && (strings.HasPrefix(fields[0], "CRON_TZ=") || strings.HasPrefix(fields[0], "TZ=")) {
		if _, zone, _ := strings.Cut(fields[0], "="); zone == "" {
			return "time zone prefix names no zone"
		}
		fields = fields[1:]
	}
	if len(fields) == 1 && strings.HasPrefix(fields[0], "@") {
		if cronDescriptors[fields[0]] {
			return ""
		}
		return fmt.Sprintf("%q is not one of @annually, @yearly, @monthly, @weekly, @daily, @midnight, @hourly", fields[0])
	}
	if len(fields) != 5 {
		return fmt.Sprintf("expected 5 fields (minute hour day-of-month month day-of-week) or an @ shorthand, got %d fields", len(fields))
	}
	for i, f := range fields {
		if msg := checkCronField(f, cronFields[i]); msg != "" {
			return cronFields[i].name + " " + msg
		}
	}
	return ""
}

func checkCronField(f string, spec cronField) string {
	for _, part := range strings.Split(f, ",") {
		rng, step, hasStep := strings.Cut(part, "/")
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || n <= 0 {
				return fmt.Sprintf("%q: step must be a positive integer", part)
			}
		}
		if rng == "*" || rng == "?" {
			continue
		}
		lo, hi, isRange := strings.Cut(rng, "-")
		a, ok := cronValue(lo, spec)
		if !ok {
			return fmt.Sprintf("%q: %q is not a value in %d-%d", part, lo, spec.min, spec.max)
		}
		if !isRange {
			continue
		}
		b, ok := cronValue(hi, spec)
		if !ok {
			return fmt.Sprintf("%q: %q is not a value in %d-%d", part, hi, spec.min, spec.max)
		}
		if a > b {
			return fmt.Sprintf("%q: range start is after its end", part)
		}
	}
	return ""
}

func cronValue(s string, spec cronField) (int, bool) {
	if v, ok := spec.names[strings.ToLower(s)]; ok {
		return v, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < spec.min || n > spec.max || strings.HasPrefix(s, "+") {
		return 0, false
	}
	return n, true
}
