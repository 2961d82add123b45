package meter

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Price is one public list price, us-east-1, USD.
type Price struct {
	Item  string  `json:"item"`
	USD   float64 `json:"usd"`
	Per   string  `json:"per"`
	URL   string  `json:"url"`
	Notes string  `json:"notes,omitempty"`
}

// PricesAsOf is when the figures of Prices were read. They were not
// fetched by code: they are the list prices as published on the URLs for
// us-east-1 in 2025, copied by hand, without free tiers (which are per
// account, not per cluster).
const PricesAsOf = "2025 (list prices as published for us-east-1; not re-checked online)"

// Prices are the list prices the cost report uses.
var Prices = map[string]Price{
	"apigw.rest":       {Item: "API Gateway REST API requests", USD: 3.50, Per: "million requests (first 333 M)", URL: "https://aws.amazon.com/api-gateway/pricing/"},
	"apigw.http":       {Item: "API Gateway HTTP API requests", USD: 1.00, Per: "million requests (first 300 M)", URL: "https://aws.amazon.com/api-gateway/pricing/", Notes: "for comparison; nodewright deploys a REST API"},
	"lambda.gbs.arm":   {Item: "Lambda duration, arm64", USD: 0.0000133334, Per: "GB-second", URL: "https://aws.amazon.com/lambda/pricing/"},
	"lambda.requests":  {Item: "Lambda requests", USD: 0.20, Per: "million requests", URL: "https://aws.amazon.com/lambda/pricing/"},
	"ddb.wru":          {Item: "DynamoDB on-demand write request units", USD: 0.625, Per: "million WRU", URL: "https://aws.amazon.com/dynamodb/pricing/on-demand/", Notes: "after the November 2024 on-demand price cut"},
	"ddb.rru":          {Item: "DynamoDB on-demand read request units", USD: 0.125, Per: "million RRU", URL: "https://aws.amazon.com/dynamodb/pricing/on-demand/"},
	"ddb.storage":      {Item: "DynamoDB standard storage", USD: 0.25, Per: "GB-month (first 25 GB free)", URL: "https://aws.amazon.com/dynamodb/pricing/on-demand/"},
	"sfn.transitions":  {Item: "Step Functions standard state transitions", USD: 0.025, Per: "thousand transitions", URL: "https://aws.amazon.com/step-functions/pricing/"},
	"sqs.standard":     {Item: "SQS standard queue requests", USD: 0.40, Per: "million requests (64 KB chunks)", URL: "https://aws.amazon.com/sqs/pricing/"},
	"sqs.fifo":         {Item: "SQS FIFO queue requests", USD: 0.50, Per: "million requests (64 KB chunks)", URL: "https://aws.amazon.com/sqs/pricing/"},
	"events.custom":    {Item: "EventBridge custom events", USD: 1.00, Per: "million events", URL: "https://aws.amazon.com/eventbridge/pricing/", Notes: "AWS service events on the default bus (EC2's) are free"},
	"scheduler":        {Item: "EventBridge Scheduler invocations", USD: 1.00, Per: "million invocations (after 14 M free per month)", URL: "https://aws.amazon.com/eventbridge/pricing/"},
	"logs.ingest":      {Item: "CloudWatch Logs ingestion (standard)", USD: 0.50, Per: "GB", URL: "https://aws.amazon.com/cloudwatch/pricing/"},
	"cw.alarm":         {Item: "CloudWatch standard-resolution alarm", USD: 0.10, Per: "alarm-month (per metric; a math alarm costs per metric)", URL: "https://aws.amazon.com/cloudwatch/pricing/"},
	"cw.dashboard":     {Item: "CloudWatch dashboard", USD: 3.00, Per: "dashboard-month (first 3 per account free)", URL: "https://aws.amazon.com/cloudwatch/pricing/"},
	"cw.metric":        {Item: "CloudWatch custom metric", USD: 0.30, Per: "metric-month (first 10,000)", URL: "https://aws.amazon.com/cloudwatch/pricing/"},
	"fargate.vcpu":     {Item: "Fargate vCPU, Linux x86", USD: 0.04048, Per: "vCPU-hour", URL: "https://aws.amazon.com/fargate/pricing/"},
	"fargate.gb":       {Item: "Fargate memory, Linux x86", USD: 0.004445, Per: "GB-hour", URL: "https://aws.amazon.com/fargate/pricing/"},
	"eks.automode.m5l": {Item: "EKS Auto Mode management fee, m5.large", USD: 0.01152, Per: "instance-hour (12% of m5.large's $0.096)", URL: "https://aws.amazon.com/eks/pricing/"},
	"ec2.m5.large":     {Item: "EC2 m5.large on-demand, Linux", USD: 0.096, Per: "instance-hour", URL: "https://aws.amazon.com/ec2/pricing/on-demand/"},
	"logs.accessBytes": {Item: "API Gateway access log line (JSON with standard fields), estimated", USD: 0, Per: "about 350 bytes per request", URL: "https://docs.aws.amazon.com/apigateway/latest/developerguide/set-up-logging.html", Notes: "a size, not a price: the access log group ingests it"},
	"sqs.esm.empty":    {Item: "SQS event source mapping idle polls, modelled", USD: 0, Per: "standard queue: 2 pollers x one 20 s long poll each = 6 receives a minute; FIFO queue: 5 pollers = 15 receives a minute", URL: "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html", Notes: "a count, not a price: for standard queues Lambda scales back to five concurrent batches at low traffic and can optimize to as few as 2 (not with maximum concurrency set, which nodewright does not set); the page states no idle figure for FIFO queues, so they keep five (an upper bound); 20 s is SQS's longest long poll"},
}

// MonthHours is the month AWS's calculator prices by.
const MonthHours = 730

// accessLogBytes is the size of one API Gateway access-log line
// (Prices["logs.accessBytes"]).
const accessLogBytes = 350

// The idle receives a minute of one queue's event source mapping
// (Prices["sqs.esm.empty"]): its pollers, each one long poll of
// esmLongPoll at a time. For a standard queue, Lambda's documented floor
// at low traffic ("can optimize to as few as 2 concurrent batches", when
// the mapping sets no maximum concurrency); for a FIFO queue, for which
// the page states no idle figure, the five concurrent batches it scales
// back to at low traffic.
const (
	esmLongPoll               = 20 * time.Second
	esmStandardPollers        = 2
	esmFIFOPollers            = 5
	esmStandardPollsPerMinute = esmStandardPollers * int(time.Minute/esmLongPoll)
	esmFIFOPollsPerMinute     = esmFIFOPollers * int(time.Minute/esmLongPoll)
)

// Fixed are the monthly costs that do not scale with traffic.
type Fixed struct {
	Alarms     int `json:"alarms"`
	Dashboards int `json:"dashboards"`
	Metrics    int `json:"metrics"`
	// FIFOQueues and StandardQueues are the queues the event source
	// mappings poll, by type: provisioning is FIFO, interruption (when on)
	// standard.
	FIFOQueues     int `json:"fifoQueues"`
	StandardQueues int `json:"standardQueues"`
}

// Line is one service's monthly cost.
type Line struct {
	Service string  `json:"service"`
	USD     float64 `json:"usd"`
	How     string  `json:"how"`
}

// Bill is a report extrapolated to a month and priced.
type Bill struct {
	Window time.Duration `json:"windowNs"`
	Lines  []Line        `json:"lines"`
	Total  float64       `json:"total"`
}

// Monthly extrapolates rep (measured over rep.Window) to a month of
// MonthHours and prices it with Prices; fixed adds the alarms, dashboards,
// custom metrics and idle queue polls. The measured empty receives of the
// local pumps (1-2 s long polls) are replaced by the production model
// (esmFIFOPollsPerMinute or esmStandardPollsPerMinute per queue, each
// priced at its queue type's rate); the measured SQS requests are priced as
// FIFO for the provisioning queue's calls (all but the interruption
// queue's, which the local stack does not tell apart: FIFO, the higher
// price, is used for all).
func Monthly(rep Report, fixed Fixed) Bill {
	scale := float64(MonthHours) * float64(time.Hour) / float64(rep.Window)
	per := func(k string, units float64) float64 { return units * Prices[k].USD }
	var lines []Line
	addLine := func(service string, usd float64, how string, args ...any) {
		lines = append(lines, Line{Service: service, USD: usd, How: fmt.Sprintf(how, args...)})
	}
	apiCalls, _ := rep.Total(APIGateway, UnitRequests)
	addLine(APIGateway, per("apigw.rest", float64(apiCalls)*scale/1e6), "%.0f requests/month x $%.2f/M (REST)", float64(apiCalls)*scale, Prices["apigw.rest"].USD)
	invocations, gbs := rep.Total(Lambda, UnitGBSeconds)
	addLine(Lambda, per("lambda.gbs.arm", gbs*scale)+per("lambda.requests", float64(invocations)*scale/1e6),
		"%.0f invocations, %.0f GB-s/month (arm64)", float64(invocations)*scale, gbs*scale)
	_, wru := rep.Total(DynamoDB, UnitWRU)
	_, rru := rep.Total(DynamoDB, UnitRRU)
	addLine(DynamoDB, per("ddb.wru", wru*scale/1e6)+per("ddb.rru", rru*scale/1e6), "%.0f WRU + %.0f RRU/month (on-demand; storage below 25 GB free)", wru*scale, rru*scale)
	_, tr := rep.Total(StepFunctions, UnitTransitions)
	addLine(StepFunctions, per("sfn.transitions", tr*scale/1e3), "%.0f transitions/month", tr*scale)
	var sqsUnits float64
	for _, row := range rep.Rows {
		if row.Service == SQS && row.API != "ReceiveMessage (empty)" {
			sqsUnits += row.Units
		}
	}
	idleFIFO := float64(fixed.FIFOQueues * esmFIFOPollsPerMinute * MonthHours * 60)
	idleStandard := float64(fixed.StandardQueues * esmStandardPollsPerMinute * MonthHours * 60)
	addLine(SQS, per("sqs.fifo", (sqsUnits*scale+idleFIFO)/1e6)+per("sqs.standard", idleStandard/1e6),
		"%.0f requests/month measured + idle event-source polls (modelled): %.0f FIFO, %.0f standard", sqsUnits*scale, idleFIFO, idleStandard)
	sched, _ := rep.Total(Scheduler, UnitRequests)
	events, _ := rep.Total(EventBridge, UnitEvents)
	addLine("EventBridge", per("scheduler", float64(sched)*scale/1e6), "%.0f schedule invocations/month (inside Scheduler's 14 M free; priced without it), %.0f EC2 events (free)", float64(sched)*scale, float64(events)*scale)
	_, logBytes := rep.Total(Logs, UnitBytes)
	var fnBytes float64
	for _, row := range rep.Rows {
		if row.Service == Logs && !strings.HasPrefix(row.API, "component:") && row.API != "other" {
			fnBytes += row.Units
		}
	}
	access := float64(apiCalls) * accessLogBytes
	gb := (fnBytes + access) * scale / 1e9
	addLine("CloudWatch Logs", per("logs.ingest", gb), "%.3f GB/month ingested (functions' lines %.0f B + API access lines %.0f B in the window; stand-in lines %.0f B not counted)", gb, fnBytes, access, logBytes-fnBytes)
	cw := per("cw.alarm", float64(fixed.Alarms)) + per("cw.dashboard", float64(fixed.Dashboards)) + per("cw.metric", float64(fixed.Metrics))
	addLine("CloudWatch alarms, dashboard, metrics", cw, "%d alarm metrics x $0.10, %d dashboards x $3, %d custom metrics x $0.30", fixed.Alarms, fixed.Dashboards, fixed.Metrics)
	b := Bill{Window: rep.Window, Lines: lines}
	for _, l := range lines {
		b.Total += l.USD
	}
	return b
}

// WriteTable prints the bill.
func (b Bill) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "measured over %s, extrapolated to %d h\t\t\n", b.Window.Round(time.Second), MonthHours)
	lines := slices.Clone(b.Lines)
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t$%.2f\t%s\n", l.Service, l.USD, l.How)
	}
	fmt.Fprintf(tw, "total\t$%.2f\t\n", b.Total)
	return tw.Flush()
}
