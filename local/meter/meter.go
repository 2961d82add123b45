// Package meter counts what the local stack's AWS stand-ins would bill:
// every request to them by service and API, in the units AWS prices them
// in (API Gateway requests, Lambda invocations and GB-seconds at the
// configured memory, DynamoDB read and write request units computed from
// item sizes as DynamoDB computes them, Step Functions state transitions,
// SQS requests per 64 KB chunk, EventBridge events put, CloudWatch Logs
// bytes per function). local/stack feeds it; Report prints it.
//
// It is an observer: nothing it does changes what the stand-ins answer.
package meter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Services, as Row.Service names them.
const (
	APIGateway    = "API Gateway"
	Lambda        = "Lambda"
	DynamoDB      = "DynamoDB"
	StepFunctions = "Step Functions"
	SQS           = "SQS"
	EventBridge   = "EventBridge"
	Logs          = "CloudWatch Logs"
	// DynamoDBByCaller attributes the DynamoDB rows to the function that
	// made the requests (API "<function> <operation>"): the same requests
	// and units as the DynamoDB rows, counted a second time by caller, so
	// Monthly prices the DynamoDB rows only.
	DynamoDBByCaller = "DynamoDB by caller"
)

type callerKey struct{}

// WithCaller returns ctx naming function as the caller of the DynamoDB
// requests sent under it (the SDK passes an operation's context to its
// HTTP request, where Transport reads it). Trace data, as a request ID is.
func WithCaller(ctx context.Context, function string) context.Context {
	return context.WithValue(ctx, callerKey{}, function)
}

// callerOf is the function WithCaller named, "" when none.
func callerOf(ctx context.Context) string {
	s, _ := ctx.Value(callerKey{}).(string)
	return s
}

// Units, as Row.Unit names them.
const (
	UnitRequests    = "requests"
	UnitGBSeconds   = "GB-s"
	UnitWRU         = "WRU"
	UnitRRU         = "RRU"
	UnitTransitions = "transitions"
	UnitEvents      = "events"
	UnitBytes       = "bytes"
)

// Row is the meter of one service's API (or one function, or one state
// machine).
type Row struct {
	Service string `json:"service"`
	// API is the operation (PutItem, SendMessage), the route (POST
	// /v1/batches), the function (provisioner) or the state machine.
	API string `json:"api"`
	// Calls counts the requests, invocations, executions, events or log
	// lines.
	Calls int64 `json:"calls"`
	// Units is what AWS bills, in Unit: for SQS the 64 KB chunks, for
	// DynamoDB the request units, for Lambda the GB-seconds, for Logs the
	// bytes ingested; for API Gateway and EventBridge the same as Calls.
	Units float64 `json:"units"`
	Unit  string  `json:"unit"`
	// Duration is the Lambda invocations' summed wall time; MemoryMiB the
	// function's configured memory (infra).
	Duration  time.Duration `json:"durationNs,omitempty"`
	MemoryMiB int           `json:"memoryMiB,omitempty"`
}

type key struct{ service, api, unit string }

// Meter accumulates rows; safe for concurrent use. The zero value is not
// usable: use New. A nil *Meter meters nothing (its methods are no-ops
// and its Report is empty), for stand-ins run without one in unit tests.
type Meter struct {
	memory map[string]int
	start  time.Time

	mu   sync.Mutex
	rows map[key]*Row
}

// New returns a meter that prices Lambda invocations at memory (function
// name -> configured MiB, LambdaMemory reads infra's table). A function
// missing from memory is metered at 0 MiB and so at 0 GB-s, visibly.
func New(memory map[string]int, now time.Time) *Meter {
	return &Meter{memory: memory, start: now, rows: map[key]*Row{}}
}

func (m *Meter) add(service, api, unit string, calls int64, units float64, f func(*Row)) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{service, api, unit}
	r := m.rows[k]
	if r == nil {
		r = &Row{Service: service, API: api, Unit: unit}
		m.rows[k] = r
	}
	r.Calls += calls
	r.Units += units
	if f != nil {
		f(r)
	}
}

// APIRequest counts one API Gateway request to route ("POST /v1/batches").
func (m *Meter) APIRequest(route string) { m.add(APIGateway, route, UnitRequests, 1, 1, nil) }

// Invocation counts one invocation of function that ran for took, billed
// at the function's configured memory (GB-s = MiB/1024 x seconds; Lambda
// bills the duration rounded up to the millisecond).
func (m *Meter) Invocation(function string, took time.Duration) {
	if m == nil {
		return
	}
	mib := m.memory[function]
	ms := (took + time.Millisecond - 1) / time.Millisecond
	gbs := float64(mib) / 1024 * float64(ms) / 1000
	m.add(Lambda, function, UnitGBSeconds, 1, gbs, func(r *Row) { r.Duration += took; r.MemoryMiB = mib })
}

// Timed runs f as one invocation of function and meters its wall time.
func Timed[T any](m *Meter, function string, f func() (T, error)) (T, error) {
	begin := time.Now()
	out, err := f()
	m.Invocation(function, time.Since(begin))
	return out, err
}

// Transitions counts one execution of state machine with n state
// transitions (Step Functions standard bills each state entered).
func (m *Meter) Transitions(machine string, n int) {
	m.add(StepFunctions, machine, UnitTransitions, 1, float64(n), nil)
}

// Scheduler is the EventBridge Scheduler row service of the schedules'
// invocations.
const Scheduler = "EventBridge Scheduler"

// Scheduled counts one invocation of function by its schedule (EventBridge
// Scheduler bills each invocation).
func (m *Meter) Scheduled(function string) { m.add(Scheduler, function, UnitRequests, 1, 1, nil) }

// Event counts one custom event put on an event bus (detail type names the
// row).
func (m *Meter) Event(detailType string) { m.add(EventBridge, detailType, UnitEvents, 1, 1, nil) }

// SQSRequest counts one SQS request of api whose payload (request or
// response, the larger) is size bytes: SQS bills each 64 KB chunk of a
// payload as one request.
func (m *Meter) SQSRequest(api string, size int) {
	m.add(SQS, api, UnitRequests, 1, float64(SQSChunks(size)), nil)
}

// SQSChunks is the number of requests SQS bills for a payload of size
// bytes: one per started 64 KiB, at least one.
func SQSChunks(size int) int { return max(1, (size+64*1024-1)/(64*1024)) }

// dynamo counts one DynamoDB request of api consuming units of unit, and
// again under DynamoDBByCaller when caller is known.
func (m *Meter) dynamo(caller, api, unit string, units float64) {
	m.add(DynamoDB, api, unit, 1, units, nil)
	if caller != "" {
		m.add(DynamoDBByCaller, caller+" "+api, unit, 1, units, nil)
	}
}

// LogLine counts one log line of function of size bytes (CloudWatch Logs
// bills ingestion by the bytes of the events).
func (m *Meter) LogLine(function string, size int) {
	m.add(Logs, function, UnitBytes, 1, float64(size), nil)
}

// LogWriter returns w with every JSON line written through it metered as
// a log line of its "function" attribute (or "component", or "other").
// slog's JSON handler writes one line per Write.
func (m *Meter) LogWriter(w io.Writer) io.Writer {
	if m == nil {
		return w
	}
	return &logWriter{w: w, m: m}
}

type logWriter struct {
	w io.Writer
	m *Meter
}

func (l *logWriter) Write(p []byte) (int, error) {
	for line := range bytes.SplitAfterSeq(p, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var attrs struct {
			Function  string `json:"function"`
			Component string `json:"component"`
		}
		_ = json.Unmarshal(line, &attrs)
		name := attrs.Function
		if name == "" && attrs.Component != "" {
			name = "component:" + attrs.Component
		}
		if name == "" {
			name = "other"
		}
		l.m.LogLine(name, len(line))
	}
	return l.w.Write(p)
}

// Report is a copy of the meter at one instant.
type Report struct {
	// Window is how long the meter has run.
	Window time.Duration `json:"windowNs"`
	Rows   []Row         `json:"rows"`
}

// Report returns the rows so far, sorted by service then API, with the
// window since New.
func (m *Meter) Report(now time.Time) Report {
	if m == nil {
		return Report{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rep := Report{Window: now.Sub(m.start)}
	for _, r := range m.rows {
		rep.Rows = append(rep.Rows, *r)
	}
	slices.SortFunc(rep.Rows, func(a, b Row) int {
		return strings.Compare(a.Service+"\x00"+a.API+"\x00"+a.Unit, b.Service+"\x00"+b.API+"\x00"+b.Unit)
	})
	return rep
}

// Find returns the row of service, api and unit, and whether there is one.
func (r Report) Find(service, api, unit string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Service == service && row.API == api && row.Unit == unit {
			return row, true
		}
	}
	return Row{}, false
}

// Total sums Units of service's rows in unit (all APIs), and their Calls.
func (r Report) Total(service, unit string) (calls int64, units float64) {
	for _, row := range r.Rows {
		if row.Service == service && row.Unit == unit {
			calls += row.Calls
			units += row.Units
		}
	}
	return calls, units
}

// WriteTable prints the report as a short table: one line per row, then a
// line per service with its totals.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "metered over %s\t\t\t\t\t\n", r.Window.Round(time.Second))
	fmt.Fprintln(tw, "service\tapi\tcalls\tunits\tunit\tnote\t")
	for _, row := range r.Rows {
		note := ""
		if row.Service == Lambda {
			note = fmt.Sprintf("%d MiB, mean %s", row.MemoryMiB, (row.Duration / time.Duration(max(row.Calls, 1))).Round(time.Millisecond))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t\n", row.Service, row.API, row.Calls, formatUnits(row.Units), row.Unit, note)
	}
	return tw.Flush()
}

func formatUnits(u float64) string {
	if u == float64(int64(u)) {
		return fmt.Sprintf("%d", int64(u))
	}
	return fmt.Sprintf("%.2f", u)
}

// Since returns r less base (an earlier report of the same meter): the
// rows' growth over the window between them.
func (r Report) Since(base Report) Report {
	out := Report{Window: r.Window - base.Window}
	for _, row := range r.Rows {
		if b, ok := base.Find(row.Service, row.API, row.Unit); ok {
			row.Calls -= b.Calls
			row.Units -= b.Units
			row.Duration -= b.Duration
		}
		if row.Calls != 0 || row.Units != 0 {
			out.Rows = append(out.Rows, row)
		}
	}
	return out
}

// AtRate returns r with function's invocations scaled by factor, for a
// function the local stack runs at another rate than production does
// (factor = the local interval / production's): its Lambda, Scheduler and
// Logs rows, its DynamoDBByCaller rows, and its share of the DynamoDB rows
// (the units its requests consumed, as DynamoDBByCaller counts them).
// Counts are rounded to whole calls. The other rows are unchanged.
func (r Report) AtRate(function string, factor float64) Report {
	out := Report{Window: r.Window, Rows: slices.Clone(r.Rows)}
	scale := func(row *Row) {
		row.Calls = int64(math.Round(float64(row.Calls) * factor))
		row.Units *= factor
		row.Duration = time.Duration(float64(row.Duration) * factor)
	}
	prefix := function + " "
	for i := range out.Rows {
		row := &out.Rows[i]
		switch {
		case (row.Service == Lambda || row.Service == Scheduler || row.Service == Logs) && row.API == function:
			scale(row)
		case row.Service == DynamoDBByCaller && strings.HasPrefix(row.API, prefix):
			api := strings.TrimPrefix(row.API, prefix)
			for j := range out.Rows {
				d := &out.Rows[j]
				if d.Service == DynamoDB && d.API == api && d.Unit == row.Unit {
					d.Calls -= int64(math.Round(float64(row.Calls) * (1 - factor)))
					d.Units -= row.Units * (1 - factor)
				}
			}
			scale(row)
		}
	}
	return out
}
