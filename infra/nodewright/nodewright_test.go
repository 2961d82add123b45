package nodewright

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/google/go-cmp/cmp"
)

// TestDefaultDeployment synthesizes the typical deployment once (the
// repository's state machines plus a fixture one) and checks the template
// resource by resource.
func TestDefaultDeployment(t *testing.T) {
	f := newFixture(t)
	f.addStateMachine(t, "sample", filepath.Join("testdata", "sample.asl.json"))
	props := baseProps(f)
	tmpl, c := mustTemplate(t, props)
	deployed := enabledFunctions(props)

	t.Run("should create one arm64 provided.al2023 function per table row, sized as the row says", func(t *testing.T) {
		type fn struct {
			Memory, Timeout float64
			Reserved        any
			Runtime, Arch   string
		}
		want := map[string]fn{}
		for _, spec := range deployed {
			var reserved any
			if spec.singleWriter {
				reserved = float64(1)
			}
			want["nodewright "+spec.description] = fn{Memory: float64(spec.memoryMiB), Timeout: spec.timeout.Seconds(), Reserved: reserved, Runtime: "provided.al2023", Arch: "arm64"}
		}
		got := map[string]fn{}
		for _, r := range c.ofType("AWS::Lambda::Function") {
			if r.Properties["Handler"] != "bootstrap" {
				continue // the deploy-time cluster lookup
			}
			got[render(r.Properties["Description"])] = fn{
				Memory: r.Properties["MemorySize"].(float64), Timeout: r.Properties["Timeout"].(float64),
				Reserved: r.Properties["ReservedConcurrentExecutions"], Runtime: render(r.Properties["Runtime"]),
				Arch: strings.Join(strs(r.Properties["Architectures"]), ","),
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("functions mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("should give every function a log group with the deployment's retention", func(t *testing.T) {
		groups := c.ofType("AWS::Logs::LogGroup")
		for id, r := range groups {
			if got := r.Properties["RetentionInDays"]; got != float64(30) {
				t.Errorf("log group %s: RetentionInDays = %v, want 30", id, got)
			}
		}
		for id, r := range c.ofType("AWS::Lambda::Function") {
			cfg, _ := r.Properties["LoggingConfig"].(map[string]any)
			ref := strings.Trim(render(cfg["LogGroup"]), "<>")
			if _, ok := groups[ref]; !ok {
				t.Errorf("function %s logs to %q, not a log group of the stack", id, ref)
			}
		}
	})

	t.Run("should create the table exactly as the store's schema.json says", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(repoRoot, "shared", "aws", "ddbstore", "schema.json"))
		if err != nil {
			t.Fatal(err)
		}
		var schema tableSchema
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		keys := func(pk, sk string) []any {
			out := []any{map[string]any{"AttributeName": pk, "KeyType": "HASH"}}
			if sk != "" {
				out = append(out, map[string]any{"AttributeName": sk, "KeyType": "RANGE"})
			}
			return out
		}
		var gsis []any
		for _, ix := range schema.Indexes {
			gsis = append(gsis, map[string]any{"IndexName": ix.Name, "KeySchema": keys(ix.PartitionKey, ix.SortKey), "Projection": map[string]any{"ProjectionType": ix.Projection}})
		}
		countIs(t, tmpl, "AWS::DynamoDB::Table", 1)
		hasResource(t, tmpl, "AWS::DynamoDB::Table", map[string]any{
			"DeletionPolicy": "Retain",
			"Properties": map[string]any{
				"KeySchema":                        keys(schema.PartitionKey, schema.SortKey),
				"GlobalSecondaryIndexes":           gsis,
				"BillingMode":                      schema.BillingMode,
				"TimeToLiveSpecification":          map[string]any{"AttributeName": schema.TTLAttribute, "Enabled": true},
				"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
				"SSESpecification":                 map[string]any{"SSEEnabled": true},
				"DeletionProtectionEnabled":        true,
			},
		})
	})

	t.Run("should give every queue a dead-letter queue, server-side encryption and TLS-only access", func(t *testing.T) {
		queues := c.ofType("AWS::SQS::Queue")
		deadLetters := map[string]bool{}
		for _, r := range queues {
			if rp, ok := r.Properties["RedrivePolicy"].(map[string]any); ok {
				deadLetters[strings.TrimSuffix(strings.Trim(render(rp["deadLetterTargetArn"]), "<>"), ".Arn")] = true
			}
		}
		targets := map[string]bool{}
		for _, r := range c.ofType("AWS::Scheduler::Schedule") {
			target := r.Properties["Target"].(map[string]any)
			targets[strings.TrimSuffix(strings.Trim(render(target["DeadLetterConfig"].(map[string]any)["Arn"]), "<>"), ".Arn")] = true
		}
		for id, r := range queues {
			if r.Properties["SqsManagedSseEnabled"] != true {
				t.Errorf("queue %s: not encrypted (SqsManagedSseEnabled = %v)", id, r.Properties["SqsManagedSseEnabled"])
			}
			if _, ok := r.Properties["RedrivePolicy"]; !ok && !deadLetters[id] && !targets[id] {
				t.Errorf("queue %s: neither has a dead-letter queue nor is one", id)
			}
		}
		tls := 0
		for _, r := range c.ofType("AWS::SQS::QueuePolicy") {
			for _, st := range parseStatements("", r.Properties["PolicyDocument"]) {
				if st.effect == "Deny" && st.conditions["Bool"]["aws:SecureTransport"] == "false" {
					tls += len(strs(r.Properties["Queues"]))
				}
			}
		}
		if tls != len(queues) {
			t.Errorf("%d of %d queues deny non-TLS requests", tls, len(queues))
		}
	})

	t.Run("should make the provisioning queue FIFO with a visibility timeout above the provisioner's timeout", func(t *testing.T) {
		provisioner := specByName(t, "provisioner")
		hasProps(t, tmpl, "AWS::SQS::Queue", map[string]any{
			"FifoQueue":         true,
			"VisibilityTimeout": 3 * provisioner.timeout.Seconds(),
			"RedrivePolicy":     assertions.Match_ObjectLike(&map[string]any{"maxReceiveCount": 5}),
		})
		hasProps(t, tmpl, "AWS::Lambda::EventSourceMapping", map[string]any{
			"BatchSize":                      5,
			"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
			"EventSourceArn":                 assertions.Match_AnyValue(),
			"FunctionName":                   assertions.Match_AnyValue(),
			"ScalingConfig":                  assertions.Match_Absent(),
			"MaximumBatchingWindowInSeconds": assertions.Match_Absent(),
		})
	})

	t.Run("should route Karpenter's five interruption events to the interruption queue, which admits EventBridge only", func(t *testing.T) {
		type rule struct{ Source, DetailType, Target string }
		var want, got []rule
		for _, r := range interruptionRules {
			want = append(want, rule{r.source, r.detailType, "<NodewrightInterruptionQueue181B032C.Arn>"})
		}
		var ruleARNs []string
		for id, r := range c.ofType("AWS::Events::Rule") {
			pattern := r.Properties["EventPattern"].(map[string]any)
			targets := r.Properties["Targets"].([]any)
			got = append(got, rule{render(pattern["source"]), render(pattern["detail-type"]), render(targets[0].(map[string]any)["Arn"])})
			ruleARNs = append(ruleARNs, "<"+id+".Arn>")
		}
		less := func(a, b rule) int { return strings.Compare(a.DetailType, b.DetailType) }
		slices.SortFunc(want, less)
		slices.SortFunc(got, less)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("rules mismatch (-want +got):\n%s", diff)
		}
		slices.Sort(ruleARNs)
		// The queue and its DLQ (EventBridge's dead-letter target for
		// undeliverable events) each admit exactly the five rules.
		admitted := map[string][]string{}
		for _, r := range c.ofType("AWS::SQS::QueuePolicy") {
			queues := strings.Join(strs(r.Properties["Queues"]), ",")
			for _, st := range parseStatements("", r.Properties["PolicyDocument"]) {
				if st.effect != "Allow" {
					continue
				}
				if diff := cmp.Diff([]string{"Service:events.amazonaws.com"}, st.principals); diff != "" {
					t.Errorf("queue %s admits another principal (-want +got):\n%s", queues, diff)
				}
				admitted[queues] = append(admitted[queues], render(st.conditions["ArnEquals"]["aws:SourceArn"]))
			}
		}
		// The DLQ is the standard one the schedules share.
		rp := c.ofType("AWS::SQS::Queue")["NodewrightInterruptionQueue181B032C"].Properties["RedrivePolicy"].(map[string]any)
		dlq := strings.TrimSuffix(render(rp["deadLetterTargetArn"]), ".Arn>") + ">"
		for _, r := range c.ofType("AWS::Scheduler::Schedule") {
			if got := render(r.Properties["Target"].(map[string]any)["DeadLetterConfig"].(map[string]any)["Arn"]); got != strings.TrimSuffix(dlq, ">")+".Arn>" {
				t.Errorf("schedule %v dead-letters to %s, want the interruption queue's DLQ %s (one standard DLQ, one alarm)", r.Properties["Description"], got, dlq)
			}
		}
		for _, q := range []string{"<NodewrightInterruptionQueue181B032C>", dlq} {
			got := admitted[q]
			slices.Sort(got)
			if diff := cmp.Diff(ruleARNs, got); diff != "" {
				t.Errorf("queue %s: senders mismatch (-rules +admitted):\n%s", q, diff)
			}
		}
		if len(admitted) != 2 {
			t.Errorf("queues admitting senders: %v, want the interruption queue and its DLQ", slices.Sorted(maps.Keys(admitted)))
		}
	})

	t.Run("should run each scheduled function every minute without retries, dead-lettering undeliverable invocations", func(t *testing.T) {
		var want, got []string
		for _, spec := range deployed {
			if spec.trigger.kind == triggerSchedule {
				want = append(want, "nodewright prod-east: "+spec.name+" every 1m0s")
			}
		}
		for _, r := range c.ofType("AWS::Scheduler::Schedule") {
			got = append(got, render(r.Properties["Description"]))
			target := r.Properties["Target"].(map[string]any)
			if diff := cmp.Diff(map[string]any{"MaximumRetryAttempts": float64(0), "MaximumEventAgeInSeconds": float64(60)}, target["RetryPolicy"]); diff != "" {
				t.Errorf("schedule %v: retry policy mismatch (-want +got):\n%s", r.Properties["Description"], diff)
			}
			if r.Properties["ScheduleExpression"] != "rate(1 minute)" || target["DeadLetterConfig"] == nil {
				t.Errorf("schedule %v: expression %v, dead-letter %v", r.Properties["Description"], r.Properties["ScheduleExpression"], target["DeadLetterConfig"])
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("schedules mismatch (-want +got):\n%s", diff)
		}
		if n := len(c.ofType("AWS::Lambda::EventInvokeConfig")); n != len(want) {
			t.Errorf("%d async invoke configs, want one per schedule (%d)", n, len(want))
		}
		hasProps(t, tmpl, "AWS::Lambda::EventInvokeConfig", map[string]any{"MaximumRetryAttempts": 0})
	})

	t.Run("should expose exactly the contract's routes, each with IAM authorization", func(t *testing.T) {
		var got []string
		for _, r := range c.ofType("AWS::ApiGateway::Method") {
			if r.Properties["AuthorizationType"] != "AWS_IAM" {
				t.Errorf("method %v: AuthorizationType = %v, want AWS_IAM", r.Properties["HttpMethod"], r.Properties["AuthorizationType"])
			}
			got = append(got, render(r.Properties["HttpMethod"]))
		}
		var want []string
		for _, r := range apiRoutes {
			want = append(want, r.method)
		}
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("methods mismatch (-want +got):\n%s", diff)
		}
		var paths []string
		for _, r := range c.ofType("AWS::ApiGateway::Resource") {
			paths = append(paths, render(r.Properties["PathPart"]))
		}
		slices.Sort(paths)
		if diff := cmp.Diff([]string{"config", "events", "metrics", "nodeclaims", "nodeclasses", "podbatches", "registrations", "replacements", "snapshots", "sync", "v1", "{id}"}, paths); diff != "" {
			t.Errorf("resources mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("should let only the forwarder's role invoke the API, and only the account's operators, not the forwarder, replace nodes", func(t *testing.T) {
		api := c.ofType("AWS::ApiGateway::RestApi")
		if len(api) != 1 {
			t.Fatalf("%d REST APIs, want 1", len(api))
		}
		for _, r := range api {
			type st struct{ Effect, Principals, Resources, NotResources, Condition string }
			var got []st
			for _, s := range parseStatements("api", r.Properties["Policy"]) {
				got = append(got, st{s.effect, strings.Join(s.principals, ","), strings.Join(s.resources, ","), strings.Join(s.notResources, ","),
					render(s.conditions["StringNotEquals"]["aws:PrincipalArn"])})
			}
			want := []st{
				{Effect: "Allow", Principals: "AWS:<NodewrightForwarderRoleAEB9510D.Arn>", Resources: "execute-api:/*"},
				{Effect: "Deny", Principals: "AWS:*", NotResources: "execute-api:/*/POST/v1/replacements", Condition: "<NodewrightForwarderRoleAEB9510D.Arn>"},
				{Effect: "Allow", Principals: "AWS:arn:<AWS::Partition>:iam::111122223333:root", Resources: "execute-api:/*/POST/v1/replacements"},
				{Effect: "Deny", Principals: "AWS:<NodewrightForwarderRoleAEB9510D.Arn>", Resources: "execute-api:/*/POST/v1/replacements"},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("resource policy mismatch (-want +got):\n%s", diff)
			}
		}
		var invokers []string
		for _, st := range c.identityStatements() {
			if slices.Contains(st.actions, "execute-api:Invoke") {
				invokers = append(invokers, st.owner)
				if len(st.resources) != 1 || !strings.HasSuffix(st.resources[0], "/*/v1/*") {
					t.Errorf("forwarder may invoke %v, want only the stage's /v1 routes", st.resources)
				}
			}
		}
		if diff := cmp.Diff([]string{"NodewrightForwarderRoleDefaultPolicyCAEDD270"}, invokers); diff != "" {
			t.Errorf("execute-api:Invoke holders mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("should deploy every state machine with all its placeholders substituted", func(t *testing.T) {
		files, err := readStateMachines(filepath.Join(f.dir, "statemachines"))
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]cfnResource{}
		for _, r := range c.ofType("AWS::StepFunctions::StateMachine") {
			byName[render(r.Properties["StateMachineName"])] = r
		}
		if len(byName) != len(files) {
			t.Errorf("%d state machines deployed, want one per file (%d)", len(byName), len(files))
		}
		for _, file := range files {
			r, ok := byName[stateMachineName(props.Cluster.Name, file.name)]
			if !ok {
				t.Errorf("%s: not deployed", file.path)
				continue
			}
			if got := render(r.Properties["DefinitionString"]); got != file.body {
				t.Errorf("%s: definition differs from the file", file.path)
			}
			subs, _ := r.Properties["DefinitionSubstitutions"].(map[string]any)
			if diff := cmp.Diff(file.placeholders, slices.Sorted(maps.Keys(subs))); diff != "" {
				t.Errorf("%s: substitutions mismatch (-placeholders +substituted):\n%s", file.path, diff)
			}
			if r.Properties["StateMachineType"] != "STANDARD" || r.Properties["TracingConfiguration"] == nil {
				t.Errorf("%s: type %v, tracing %v; want STANDARD with X-Ray", file.path, r.Properties["StateMachineType"], r.Properties["TracingConfiguration"])
			}
			logging, _ := r.Properties["LoggingConfiguration"].(map[string]any)
			if logging["Level"] != "ALL" {
				t.Errorf("%s: logging level %v, want ALL", file.path, logging["Level"])
			}
		}
	})

	type tableGrant struct{ Actions, Resources, Keys string }
	tableGrants := func(role string) []tableGrant {
		var got []tableGrant
		for _, st := range c.identityStatements() {
			if !strings.Contains(st.owner, "Nodewright"+role+"Role") {
				continue
			}
			for _, a := range st.actions {
				if strings.HasPrefix(a, "dynamodb:") {
					got = append(got, tableGrant{strings.Join(st.actions, ","), strings.Join(st.resources, ","), render(st.conditions["ForAllValues:StringLike"]["dynamodb:LeadingKeys"])})
					break
				}
			}
		}
		return got
	}
	cl := props.Cluster.Name + "#"
	table := "<NodewrightTable7364F2F2.Arn>"

	t.Run("should limit the intake role to the partition keys it uses, so it cannot touch NodeClaims, leases or budgets", func(t *testing.T) {
		got := tableGrants("Intake")
		own := cl + "IDEMPOTENCY#batch#*," + cl + "IDEMPOTENCY#config#*," + cl + "IDEMPOTENCY#registrations#*," +
			cl + "PAYLOAD#*," + cl + "CONFIG," + cl + "SNAPSHOT," + cl + "SNAPSHOT#*"
		want := []tableGrant{
			{"dynamodb:GetItem,dynamodb:Query", table, cl + "BATCH#*," + cl + "NODECLAIM," + cl + "EVENT," + cl + "NODECLASSSTATUS," + cl + "METRIC," + own},
			{"dynamodb:PutItem,dynamodb:UpdateItem,dynamodb:DeleteItem", table, own},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("intake role's DynamoDB statements mismatch (-want +got):\n%s", diff)
		}
		for _, g := range got {
			if strings.Contains(g.Keys, "NODECLAIM") && strings.Contains(g.Actions, "PutItem") || strings.Contains(g.Keys, "BUDGET") || strings.Contains(g.Keys, "LEASE") {
				t.Errorf("intake may %s %s", g.Actions, g.Keys)
			}
		}
	})

	t.Run("should limit the provisioner, gc, disruption and interruption roles to the partition keys they use, so none can touch a lease or budget", func(t *testing.T) {
		for _, tc := range []struct {
			role string
			want []tableGrant
			// claims is whether the role may write NodeClaims.
			claims bool
		}{
			{"Provisioner", []tableGrant{
				{"dynamodb:GetItem,dynamodb:Query", table, cl + "CONFIG," + cl + "SNAPSHOT," + cl + "SNAPSHOT#*," + cl + "PAYLOAD#*," + cl + "EC2DATA#*," +
					cl + "NODECLAIM," + cl + "BATCH#*," + cl + "OFFERING," + cl + "SUBNET," + cl + "NODECLASSSTATUS," + cl + "METRIC," + cl + "EVENT"},
				{"dynamodb:PutItem,dynamodb:UpdateItem,dynamodb:DeleteItem", table, cl + "NODECLAIM," + cl + "BATCH#*," + cl + "OFFERING," + cl + "SUBNET," + cl + "NODECLASSSTATUS," + cl + "PAYLOAD#*," + cl + "METRIC," + cl + "EVENT"},
				{"dynamodb:Query", table + "/index/byInstance", cl + "*"},
			}, true},
			{"Gc", []tableGrant{
				{"dynamodb:GetItem,dynamodb:Query", table, cl + "CONFIG," + cl + "SNAPSHOT," + cl + "SNAPSHOT#*," + cl + "NODECLAIM," + cl + "EVENT," + cl + "METRIC," + cl + "EC2DATA#*"},
				{"dynamodb:PutItem,dynamodb:UpdateItem,dynamodb:DeleteItem", table, cl + "NODECLAIM," + cl + "EVENT," + cl + "METRIC," + cl + "EC2DATA#*"},
			}, true},
			{"Disruption", []tableGrant{
				{"dynamodb:GetItem,dynamodb:Query", table, cl + "CONFIG," + cl + "SNAPSHOT," + cl + "SNAPSHOT#*," + cl + "OFFERING," + cl + "EC2DATA#*," +
					cl + "NODECLAIM," + cl + "PAYLOAD#*," + cl + "EVENT," + cl + "NODECLASSSTATUS," + cl + "METRIC"},
				{"dynamodb:PutItem,dynamodb:UpdateItem,dynamodb:DeleteItem", table, cl + "NODECLAIM," + cl + "PAYLOAD#*," + cl + "EVENT," + cl + "NODECLASSSTATUS," + cl + "METRIC"},
			}, true},
			{"Interruption", []tableGrant{
				{"dynamodb:GetItem,dynamodb:Query", table, cl + "NODECLAIM," + cl + "IDEMPOTENCY#interruption#*," + cl + "OFFERING," + cl + "EVENT," + cl + "METRIC"},
				{"dynamodb:PutItem,dynamodb:UpdateItem,dynamodb:DeleteItem", table, cl + "IDEMPOTENCY#interruption#*," + cl + "OFFERING," + cl + "EVENT," + cl + "METRIC"},
				{"dynamodb:Query", table + "/index/byInstance", cl + "*"},
			}, false},
			{"Instancestatus", []tableGrant{
				{"dynamodb:GetItem,dynamodb:Query", table, cl + "NODECLAIM," + cl + "IDEMPOTENCY#instance-status#*," + cl + "EVENT"},
				{"dynamodb:PutItem,dynamodb:UpdateItem,dynamodb:DeleteItem", table, cl + "IDEMPOTENCY#instance-status#*," + cl + "EVENT"},
			}, false},
		} {
			got := tableGrants(tc.role)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s role's DynamoDB statements mismatch (-want +got):\n%s", tc.role, diff)
			}
			for _, g := range got {
				if !tc.claims && strings.Contains(g.Keys, "NODECLAIM") && strings.Contains(g.Actions, "PutItem") || strings.Contains(g.Keys, "BUDGET") || strings.Contains(g.Keys, "LEASE") {
					t.Errorf("%s may %s %s", tc.role, g.Actions, g.Keys)
				}
			}
		}
	})

	t.Run("should limit the disrupttask role to budgets, NodeClaims, its commands and fleet requests, events and unavailability marks", func(t *testing.T) {
		got := tableGrants("Disrupttask")
		write := cl + "NODECLAIM," + cl + "BUDGET," + cl + "EVENT," + cl + "OFFERING," + cl + "SUBNET," + cl + "PAYLOAD#fleet-request/*," + cl + "METRIC"
		want := []tableGrant{
			{"dynamodb:GetItem,dynamodb:Query", table, cl + "CONFIG," + cl + "PAYLOAD#disruption/*," + cl + "PAYLOAD#nodeclass-auth/*," + cl + "EC2DATA#*," + write},
			{"dynamodb:PutItem,dynamodb:UpdateItem,dynamodb:DeleteItem", table, write},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("disrupttask role's DynamoDB statements mismatch (-want +got):\n%s", diff)
		}
		for _, g := range got {
			if strings.Contains(g.Keys, "IDEMPOTENCY") || strings.Contains(g.Keys, "SNAPSHOT") || strings.Contains(g.Keys, "LEASE") {
				t.Errorf("disrupttask may %s %s", g.Actions, g.Keys)
			}
		}
	})

	t.Run("should let a state machine invoke exactly the functions and table its placeholders name", func(t *testing.T) {
		var got []string
		for _, st := range c.identityStatements() {
			if !strings.Contains(st.owner, "SampleStateMachineRole") {
				continue
			}
			for _, a := range st.actions {
				if strings.HasPrefix(a, "lambda:") || strings.HasPrefix(a, "dynamodb:PutItem") {
					got = append(got, a+" "+strings.Join(st.resources, ","))
				}
			}
		}
		slices.Sort(got)
		want := []string{
			"dynamodb:PutItem <NodewrightTable7364F2F2.Arn>,<NodewrightTable7364F2F2.Arn>/index/byInstance,<NodewrightTable7364F2F2.Arn>/index/byNodePool",
			"lambda:InvokeFunction <NodewrightGc4D2C2EB1.Arn>",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("state machine grants mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("should let functions start exactly the state machines their rows name", func(t *testing.T) {
		var want, got []string
		for _, spec := range deployed {
			for _, m := range slices.Concat(slices.Collect(maps.Values(spec.starts)), spec.continues) {
				want = append(want, camel(spec.name)+" "+stateMachineName(props.Cluster.Name, m))
			}
		}
		owner := regexp.MustCompile(`^Nodewright([A-Za-z]+?)Role`)
		for _, st := range c.identityStatements() {
			if !slices.Contains(st.actions, "states:StartExecution") || !strings.HasPrefix(st.owner, "Nodewright") {
				continue
			}
			m := owner.FindStringSubmatch(st.owner)
			for _, r := range st.resources {
				prefix := "arn:<AWS::Partition>:states:us-east-1:111122223333:stateMachine:"
				if !strings.HasPrefix(r, prefix) || m == nil {
					t.Errorf("%v: not one state machine of this stack", st)
					continue
				}
				got = append(got, m[1]+" "+strings.TrimPrefix(r, prefix))
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("states:StartExecution grants mismatch (-want +got):\n%s", diff)
		}
		if len(want) == 0 {
			t.Error("no function starts a state machine: the check checked nothing")
		}
	})

	t.Run("should let the disruption function read the status of exactly the executions of both state machines", func(t *testing.T) {
		var got []string
		for _, st := range c.identityStatements() {
			if slices.Contains(st.actions, "states:DescribeExecution") {
				got = append(got, st.owner+" "+strings.Join(st.resources, ","))
			}
		}
		prefix := "arn:<AWS::Partition>:states:us-east-1:111122223333:execution:"
		want := []string{}
		for _, m := range []string{"disruption", "interruption"} {
			want = append(want, "NodewrightDisruptionRole "+prefix+stateMachineName(props.Cluster.Name, m)+":*")
		}
		for i := range got {
			got[i] = regexp.MustCompile(`^(NodewrightDisruptionRole)[A-Za-z0-9]*`).ReplaceAllString(got[i], "$1")
		}
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("states:DescribeExecution grants mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("should never grant a launch or terminate action on what it creates without the cluster's tags", func(t *testing.T) {
		referenced := []string{"image", "snapshot", "security-group", "subnet", "capacity-reservation", "placement-group"}
		checked := 0
		for _, st := range c.identityStatements() {
			if st.effect != "Allow" {
				continue
			}
			for _, a := range st.actions {
				if a == "*" || a == "ec2:*" || strings.HasSuffix(a, ":*") {
					t.Errorf("%v: grants every action of a service", st)
				}
			}
			if !slices.ContainsFunc(st.actions, func(a string) bool { return slices.Contains(ec2LaunchActions, a) }) {
				continue
			}
			checked++
			tagged := slices.ContainsFunc(st.conditionKeys(), func(k string) bool {
				return strings.HasPrefix(k, "aws:RequestTag/kubernetes.io/cluster/") || strings.HasPrefix(k, "aws:ResourceTag/kubernetes.io/cluster/")
			})
			if tagged {
				continue
			}
			for _, res := range st.resources {
				if !slices.Contains(referenced, ec2ResourceType(res)) {
					t.Errorf("%v: grants %s without a tag condition", st, res)
				}
			}
			if slices.Contains(st.actions, "ec2:TerminateInstances") {
				t.Errorf("%v: grants TerminateInstances without a tag condition", st)
			}
		}
		if checked == 0 {
			t.Error("no statement grants a launch or terminate action: the check checked nothing")
		}
	})

	t.Run("should pass only the node role, and only to EC2", func(t *testing.T) {
		var got []string
		for _, st := range c.identityStatements() {
			if slices.Contains(st.actions, "iam:PassRole") {
				got = append(got, strings.Join(st.resources, ",")+" to "+render(st.conditions["StringEquals"]["iam:PassedToService"]))
			}
		}
		var want []string
		for _, spec := range deployed {
			for range slices.DeleteFunc(slices.Clone(spec.grants), func(g grant) bool { return g != grantLaunch && g != grantInstanceProfiles }) {
				want = append(want, "<NodewrightNodeRole464B6F06.Arn> to ec2.amazonaws.com,ec2.amazonaws.com.cn")
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("iam:PassRole grants mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("should name every statement of a policy distinctly", func(t *testing.T) {
		seen := map[string]bool{}
		for _, st := range c.identityStatements() {
			if st.sid == "" {
				continue
			}
			key := st.owner + "/" + st.sid
			if seen[key] {
				t.Errorf("%s: Sid %s used twice", st.owner, st.sid)
			}
			seen[key] = true
		}
	})

	t.Run("should use a wildcard resource only for actions without resource-level permissions", func(t *testing.T) {
		allowed := regexp.MustCompile(`^(ec2:Describe[A-Za-z]+|ec2:(Create|Delete)NetworkInterface|ec2:(Assign|Unassign)PrivateIpAddresses|xray:[A-Za-z]+|logs:(Create|Get|Update|Delete|List|Describe|Put)[A-Za-z]*|pricing:GetProducts)$`)
		for _, st := range c.identityStatements() {
			if !slices.Contains(st.resources, "*") {
				continue
			}
			for _, a := range st.actions {
				if !allowed.MatchString(a) {
					t.Errorf("%v: %s on every resource", st, a)
				}
			}
		}
	})

	t.Run("should give each function that reaches the cluster an access entry in its own group, and the nodes theirs", func(t *testing.T) {
		var got []string
		for _, r := range c.ofType("AWS::EKS::AccessEntry") {
			if r.Properties["AccessPolicies"] != nil {
				t.Errorf("access entry %v has access policies: RBAC groups only", r.Properties["PrincipalArn"])
			}
			got = append(got, render(r.Properties["Type"])+" "+render(r.Properties["PrincipalArn"])+" "+strings.Join(strs(r.Properties["KubernetesGroups"]), ","))
		}
		slices.Sort(got)
		want := []string{"EC2_LINUX <NodewrightNodeRole464B6F06.Arn> "}
		for _, spec := range deployed {
			if spec.kube != nil {
				want = append(want, "STANDARD <"+roleID(t, c, spec.name)+".Arn> "+spec.kube.group)
			}
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("access entries mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("should give the forwarder's role to its ServiceAccount through Pod Identity, for that ServiceAccount only", func(t *testing.T) {
		hasProps(t, tmpl, "AWS::EKS::PodIdentityAssociation", map[string]any{
			"ClusterName": "prod-east", "Namespace": "nodewright", "ServiceAccount": "nodewright-forwarder",
			"RoleArn": map[string]any{"Fn::GetAtt": []any{"NodewrightForwarderRoleAEB9510D", "Arn"}},
		})
		hasProps(t, tmpl, "AWS::IAM::Role", map[string]any{
			"AssumeRolePolicyDocument": map[string]any{"Statement": []any{map[string]any{
				"Action":    []any{"sts:AssumeRole", "sts:TagSession"},
				"Effect":    "Allow",
				"Principal": map[string]any{"Service": "pods.eks.amazonaws.com"},
				"Condition": map[string]any{"StringEquals": map[string]any{
					"aws:RequestTag/eks-cluster-name":           "prod-east",
					"aws:RequestTag/kubernetes-namespace":       "nodewright",
					"aws:RequestTag/kubernetes-service-account": "nodewright-forwarder",
				}},
			}}, "Version": "2012-10-17"},
		})
	})

	t.Run("should create no instance profile: the runtime makes one per EC2NodeClass", func(t *testing.T) {
		countIs(t, tmpl, "AWS::IAM::InstanceProfile", 0)
	})

	t.Run("should scope instance-profile changes to nodewright's path and ownership tags", func(t *testing.T) {
		profiles := "arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/nodewright/<AWS::Region>/prod-east/*"
		checked := 0
		for _, st := range c.identityStatements() {
			for _, a := range st.actions {
				if !strings.HasSuffix(a, "InstanceProfile") && a != "iam:ListInstanceProfiles" {
					continue
				}
				checked++
				if diff := cmp.Diff([]string{profiles}, st.resources); diff != "" {
					t.Errorf("%v: resources mismatch (-want +got):\n%s", st, diff)
				}
				if a == "iam:GetInstanceProfile" || a == "iam:ListInstanceProfiles" {
					continue
				}
				tags := st.conditions["StringEquals"]
				key := "aws:ResourceTag/"
				if a == "iam:CreateInstanceProfile" || st.sid == "CreateOwnedInstanceProfiles" {
					key = "aws:RequestTag/"
				}
				if tags[key+"nodewright.dev/owner"] != "prod-east" || tags[key+"kubernetes.io/cluster/prod-east"] != "owned" {
					t.Errorf("%v: %s without the ownership tag condition", st, a)
				}
			}
		}
		if checked == 0 {
			t.Error("no instance-profile grant: the check checked nothing")
		}
	})

	t.Run("should alarm on every dead-letter queue, every function's failed invocations, every state machine's failures and API 5xx", func(t *testing.T) {
		var got []string
		metrics := 0 // what CloudWatch bills: one per metric an alarm watches
		for _, r := range c.ofType("AWS::CloudWatch::Alarm") {
			if name, ok := r.Properties["MetricName"].(string); ok {
				got = append(got, name)
				metrics++
				continue
			}
			got = append(got, "expression")
			for _, q := range r.Properties["Metrics"].([]any) {
				if _, ok := q.(map[string]any)["MetricStat"]; ok {
					metrics++
				}
			}
		}
		slices.Sort(got)
		// One alarm for every function's failures (the log metric filters'
		// one metric); two DLQs: the provisioning FIFO queue's, and the
		// standard one of the interruption queue, the interruption rules
		// and the schedules.
		want := []string{"FunctionErrors-prod-east", "ApproximateNumberOfMessagesVisible", "ApproximateNumberOfMessagesVisible",
			"ApproximateAgeOfOldestMessage", "5XXError", "4XXError", "Count"} // Count: the forwarder's (forwarderops_test.go)
		wantMetrics := 1 + 2 + 4
		for range c.ofType("AWS::StepFunctions::StateMachine") {
			want = append(want, "ExecutionsFailed") // not ExecutionsAborted: monitoring.go
			wantMetrics++
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("alarms mismatch (-want +got):\n%s", diff)
		}
		if metrics != wantMetrics {
			t.Errorf("alarm metrics = %d, want %d", metrics, wantMetrics)
		}
		countIs(t, tmpl, "AWS::CloudWatch::Dashboard", 0) // Props.Dashboard defaults to false
		hasProps(t, tmpl, "AWS::CloudWatch::Alarm", map[string]any{
			"Namespace": emfNamespace, "MetricName": "FunctionErrors-prod-east", "Statistic": "Sum", "Period": 300,
			"Threshold": 1, "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
		})
	})

	t.Run("should count every function's handler errors, timeouts and crashes into the one alarmed metric", func(t *testing.T) {
		// The line lambdakit writes for a failed invocation (its test holds
		// it to what the wrapper logs).
		raw, err := os.ReadFile(filepath.Join(repoRoot, "functions", "internal", "lambdakit", "testdata", "invocation-failed.json"))
		if err != nil {
			t.Fatal(err)
		}
		var line map[string]any
		if err := json.Unmarshal(raw, &line); err != nil {
			t.Fatal(err)
		}
		if got := line[strings.TrimPrefix(failureMessageField, "$.")]; got != failureMessage {
			t.Errorf("lambdakit's failure line has %s = %v, want %q: the filter would never match it", failureMessageField, got, failureMessage)
		}
		patterns := map[string][]string{} // log group -> filter patterns
		for id, r := range c.ofType("AWS::Logs::MetricFilter") {
			tr := r.Properties["MetricTransformations"].([]any)
			if diff := cmp.Diff([]any{map[string]any{"MetricNamespace": emfNamespace, "MetricName": "FunctionErrors-prod-east", "MetricValue": "1"}}, tr); diff != "" {
				t.Errorf("metric filter %s: transformation mismatch (-want +got; no default value, so the metric has data only when a line matches):\n%s", id, diff)
			}
			group := render(r.Properties["LogGroupName"])
			patterns[group] = append(patterns[group], render(r.Properties["FilterPattern"]))
		}
		wantPatterns := []string{
			`?"Task timed out" ?"Runtime exited" ?"Runtime.ExitError" ?"Sandbox.Timedout"`,
			`{ $.message = "invocation failed" }`,
		}
		groups := 0
		for id, r := range c.ofType("AWS::Lambda::Function") {
			if r.Properties["Handler"] != "bootstrap" {
				continue // the deploy-time cluster lookup
			}
			cfg, _ := r.Properties["LoggingConfig"].(map[string]any)
			// The platform's timeout and crash lines above are its text
			// format; in Lambda's JSON log format they are JSON records the
			// pattern would never match.
			if f, ok := cfg["LogFormat"]; ok && f != "Text" {
				t.Errorf("function %s: LoggingConfig.LogFormat %v; the platform-line filter needs the Text format", id, f)
			}
			group := render(cfg["LogGroup"])
			got := patterns[group]
			slices.Sort(got)
			if diff := cmp.Diff(wantPatterns, got); diff != "" {
				t.Errorf("function %s (log group %s): filters mismatch (-want +got):\n%s", id, group, diff)
			}
			groups++
		}
		if groups != len(deployed) || len(patterns) != len(deployed) {
			t.Errorf("%d functions, %d log groups with filters; want one per deployed function (%d)", groups, len(patterns), len(deployed))
		}
	})

	t.Run("should grant every AWS API call the runtime code makes", func(t *testing.T) {
		granted := map[string]bool{}
		for _, st := range c.identityStatements() {
			if st.effect == "Allow" {
				for _, a := range st.actions {
					granted[a] = true
				}
			}
		}
		for _, action := range runtimeAPICalls(t) {
			if _, ok := ungrantedCalls[action]; ok {
				continue
			}
			if !granted[action] {
				t.Errorf("the runtime code calls %s, which no role is granted", action)
			}
		}
	})

	t.Run("should grant no EC2, SSM or Step Functions action the runtime code does not call", func(t *testing.T) {
		called := runtimeAPICalls(t)
		for _, st := range c.identityStatements() {
			if st.effect != "Allow" || !strings.HasPrefix(st.owner, "Nodewright") || strings.Contains(st.owner, "StateMachineRole") {
				continue // the Lambdas' roles only
			}
			for _, a := range st.actions {
				prefix, _, _ := strings.Cut(a, ":")
				if prefix != "ec2" && prefix != "ssm" && prefix != "states" {
					continue
				}
				if slices.Contains(called, a) {
					continue
				}
				if _, ok := impliedActions[a]; ok {
					continue
				}
				t.Errorf("%s grants %s, which the runtime code never calls", st.owner, a)
			}
		}
	})

	t.Run("should give every function each setting its code requires", func(t *testing.T) {
		for _, spec := range deployed {
			required := requiredSettings(t, spec.name)
			if required == nil {
				continue // the function's code has not landed; New still needs its bootstrap
			}
			var env map[string]any
			for _, r := range c.ofType("AWS::Lambda::Function") {
				if r.Properties["Description"] == "nodewright "+spec.description {
					env, _ = r.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
				}
			}
			for _, name := range required {
				if _, ok := env[name]; !ok {
					t.Errorf("function %s: its code requires %s, which the stack does not set", spec.name, name)
				}
			}
		}
	})
}

// roleID is the logical ID of function name's role.
func roleID(t *testing.T, c cfnTemplate, name string) string {
	t.Helper()
	for id, r := range c.ofType("AWS::IAM::Role") {
		if r.Properties["Description"] == "nodewright "+name+" Lambda" {
			return id
		}
	}
	t.Fatalf("no role for function %s", name)
	return ""
}

func specByName(t *testing.T, name string) functionSpec {
	t.Helper()
	for _, f := range functions {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no function %q in the table", name)
	return functionSpec{}
}

// lambdaReserved are the environment variables Lambda sets itself
// (Lambda Developer Guide, "Defined runtime environment variables").
var lambdaReserved = []string{
	"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_EXECUTION_ENV", "AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
	"AWS_LAMBDA_FUNCTION_VERSION", "AWS_LAMBDA_LOG_GROUP_NAME", "AWS_LAMBDA_LOG_STREAM_NAME", "AWS_LAMBDA_RUNTIME_API",
	"LAMBDA_TASK_ROOT", "LAMBDA_RUNTIME_DIR", "_HANDLER",
}

// requiredEnvRE matches a required setting read through lambdakit's Env
// (`e.String("NAME")`).
var requiredEnvRE = regexp.MustCompile(`\.String\("([A-Z][A-Z0-9_]+)"\)`)

// requiredSettings returns the required settings the code of function
// name reads, minus those Lambda sets, or nil when functions/<name> does
// not exist.
func requiredSettings(t *testing.T, name string) []string {
	t.Helper()
	dir := filepath.Join(repoRoot, "functions", name)
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	seen := map[string]bool{}
	for _, d := range append([]string{dir}, functionLibraries(t, dir)...) {
		walkRequiredSettings(t, d, seen)
	}
	return slices.Sorted(maps.Keys(seen))
}

// functionLibraries returns the folders under functions/ (other than
// internal/) that the function in dir imports, such as functions/decider
// behind the disruption and replace Lambdas: their settings are the
// function's too.
func functionLibraries(t *testing.T, dir string) []string {
	t.Helper()
	const prefix = "github.com/nodewright/nodewright/functions/"
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "main.go"), nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		rel, ok := strings.CutPrefix(path, prefix)
		if !ok || strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, filepath.Base(dir)+"/") {
			continue
		}
		out = append(out, filepath.Join(repoRoot, "functions", filepath.FromSlash(rel)))
	}
	return out
}

// walkRequiredSettings adds to seen the required settings the non-test Go
// files under dir read.
func walkRequiredSettings(t *testing.T, dir string, seen map[string]bool) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range requiredEnvRE.FindAllStringSubmatch(string(raw), -1) {
			if !slices.Contains(lambdaReserved, m[1]) {
				seen[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// apiInputRE matches an SDK request type (`ec2.CreateFleetInput`).
var apiInputRE = regexp.MustCompile(`\b(ec2|ssm|dynamodb|sqs|sfn|iam)\.([A-Z][A-Za-z0-9]*)Input\b`)

// iamPrefixes maps SDK package names to IAM service prefixes.
var iamPrefixes = map[string]string{"ec2": "ec2", "ssm": "ssm", "dynamodb": "dynamodb", "sqs": "sqs", "sfn": "states", "iam": "iam"}

// ungrantedCalls are calls the runtime code makes that need no grant of
// their own on AWS, with why.
var ungrantedCalls = map[string]string{
	"dynamodb:TransactWriteItems": "not an IAM action: DynamoDB authorizes a transaction as the PutItem, UpdateItem and DeleteItem of its items (DynamoDB Developer Guide, Using IAM with DynamoDB transactions), granted per key in TableWriteOwnKeys",
	"dynamodb:CreateTable":        "table administration by the local stack; on AWS the stack owns the table",
	"dynamodb:DescribeTable":      "table administration by the local stack",
	"dynamodb:DescribeTimeToLive": "table administration by the local stack",
	"dynamodb:UpdateTimeToLive":   "table administration by the local stack",
	"dynamodb:DeleteTable":        "table administration by the local stack",
	"sqs:CreateQueue":             "queue administration by the local stack; on AWS the stack owns the queues",
}

// impliedActions are granted though no code calls them by name, with why.
var impliedActions = map[string]string{
	"ec2:RunInstances":               "CreateFleet of type instant is also authorized as RunInstances (EC2 Fleet documentation)",
	"ec2:CreateNetworkInterface":     "the Lambda service's network interfaces in a VPC",
	"ec2:DescribeNetworkInterfaces":  "the Lambda service's network interfaces in a VPC",
	"ec2:DeleteNetworkInterface":     "the Lambda service's network interfaces in a VPC",
	"ec2:AssignPrivateIpAddresses":   "the Lambda service's network interfaces in a VPC",
	"ec2:UnassignPrivateIpAddresses": "the Lambda service's network interfaces in a VPC",
}

// runtimeAPICalls lists, as IAM actions, the AWS requests the code of
// functions/ and shared/aws/ (test doubles excepted) builds.
func runtimeAPICalls(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, dir := range []string{filepath.Join(repoRoot, "functions"), filepath.Join(repoRoot, "shared", "aws")} {
		err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case e.IsDir() && e.Name() == "awstest":
				return filepath.SkipDir
			case e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go"):
				return nil
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range apiInputRE.FindAllStringSubmatch(string(raw), -1) {
				seen[iamPrefixes[m[1]]+":"+m[2]] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) == 0 {
		t.Fatal("found no AWS request in the runtime code: wrong repository root")
	}
	return slices.Sorted(maps.Keys(seen))
}

// TestNodeClassResolutionGrants checks that every function that resolves
// EC2NodeClasses (provisioner, disruption, replace, disrupttask) may make
// each Describe call of the resolution, placement groups included
// (ec2:DescribePlacementGroups, aws: pkg/providers/placementgroup), in the
// stack's region only, and that launches may reference placement groups.
func TestNodeClassResolutionGrants(t *testing.T) {
	f := newFixture(t)
	_, c := mustTemplate(t, baseProps(f))
	want := []string{"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets"}
	for _, fn := range []string{"provisioner", "disruption", "replace", "disrupttask"} {
		owner := "Nodewright" + camel(fn) + "Role"
		var got []string
		placement := false
		for _, st := range c.identityStatements() {
			if st.effect != "Allow" || !strings.HasPrefix(st.owner, owner) {
				continue
			}
			if st.sid == "ResolveNodeClasses" {
				if diff := cmp.Diff([]string{"aws:RequestedRegion"}, st.conditionKeys()); diff != "" {
					t.Errorf("%s ResolveNodeClasses conditions (-want +got):\n%s", fn, diff)
				}
				got = append(got, st.actions...)
			}
			if st.sid == "LaunchWithReferencedResources" && slices.ContainsFunc(st.resources, func(r string) bool { return strings.HasSuffix(r, ":placement-group/*") }) {
				placement = true
			}
		}
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s resolution grants (-want +got):\n%s", fn, diff)
		}
		if launches := fn == "provisioner" || fn == "disrupttask"; launches != placement {
			t.Errorf("%s may launch referencing placement groups: %t; want %t", fn, placement, launches)
		}
	}
}
