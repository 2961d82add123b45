package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"sigs.k8s.io/yaml"
)

// parseNow returns the instant of a --now flag: RFC 3339 when set, else
// now(). The error names the flag and the format.
func parseNow(value string, now func() time.Time) (time.Time, error) {
	if value == "" {
		return now(), nil
	}
	t, err := time.Parse(time.RFC3339, value)
	if err != nil {
		return time.Time{}, fmt.Errorf("--now %q: want RFC 3339, e.g. 2026-01-01T00:00:00Z", value)
	}
	return t, nil
}

// outputFormats are the values of every command's -o flag.
const outputFormats = "table, json or yaml"

// checkOutput returns an error naming -o unless format is table, json or
// yaml.
func checkOutput(format string) error {
	switch format {
	case "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("-o %q: want %s", format, outputFormats)
}

// printReport is the tail of the report commands (plan, disruption): a
// parse error ends the command (2, a usage error already printed);
// otherwise compute runs and its report is printed by
// writeReport. It returns the exit code: 1 when compute or the write
// fails, with the error on stderr after "nodewright <name>: ".
func printReport[R any](name, output string, parseErr error, compute func() (R, error), table func(R, io.Writer) error, stdout, stderr io.Writer) int {
	if parseErr != nil {
		return exitUsage
	}
	report, err := compute()
	if err != nil {
		fmt.Fprintf(stderr, "nodewright %s: %v\n", name, err)
		return 1
	}
	return writeReport(name, output, report, table, stdout, stderr)
}

// writeReport prints report on stdout as indented JSON (output "json"),
// as YAML with the JSON field names (output "yaml", sigs.k8s.io/yaml) or
// by table. It returns 0, or 1 when the write fails, with the error on
// stderr after "nodewright <name>: ".
func writeReport[R any](name, output string, report R, table func(R, io.Writer) error, stdout, stderr io.Writer) int {
	var err error
	switch output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	case "yaml":
		var b []byte
		if b, err = yaml.Marshal(report); err == nil {
			_, err = stdout.Write(b)
		}
	default:
		err = table(report, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "nodewright %s: write output: %v\n", name, err)
		return 1
	}
	return 0
}
