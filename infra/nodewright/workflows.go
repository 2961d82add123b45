package nodewright

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/jsii-runtime-go"
)

// aslSuffix names the state machine files; the file name before it is the
// state machine's name in this package ("disruption.asl.json" ->
// "disruption").
const aslSuffix = ".asl.json"

// placeholderRE matches a CloudFormation definition substitution.
var placeholderRE = regexp.MustCompile(`\$\{([^}]*)\}`)

// stateMachineFile is one statemachines/*.asl.json.
type stateMachineFile struct {
	name string
	path string
	// body is the definition as written; CloudFormation fills its
	// placeholders.
	body         string
	placeholders []string // sorted, distinct
}

// readStateMachines reads every *.asl.json of dir, sorted by name. A file
// that is not a JSON object with StartAt and States is an error.
func readStateMachines(dir string) ([]stateMachineFile, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("state machines: %w", err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*"+aslSuffix))
	if err != nil {
		return nil, fmt.Errorf("state machines: %w", err)
	}
	slices.Sort(paths)
	var out []stateMachineFile
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("state machine: %w", err)
		}
		var def struct {
			StartAt string                     `json:"StartAt"`
			States  map[string]json.RawMessage `json:"States"`
		}
		if err := json.Unmarshal(raw, &def); err != nil {
			return nil, fmt.Errorf("state machine %s: %w", p, err)
		}
		if def.StartAt == "" || len(def.States) == 0 {
			return nil, fmt.Errorf("state machine %s: StartAt and States are required", p)
		}
		seen := map[string]bool{}
		for _, m := range placeholderRE.FindAllStringSubmatch(string(raw), -1) {
			seen[m[1]] = true
		}
		out = append(out, stateMachineFile{
			name:         strings.TrimSuffix(filepath.Base(p), aslSuffix),
			path:         p,
			body:         string(raw),
			placeholders: slices.Sorted(maps.Keys(seen)),
		})
	}
	return out, nil
}

// checkStarts fails when a function starts or continues a state machine
// that has no file.
func checkStarts(specs []functionSpec, machines []stateMachineFile) error {
	var errs []error
	exists := func(name string) bool {
		return slices.ContainsFunc(machines, func(m stateMachineFile) bool { return m.name == name })
	}
	for _, f := range specs {
		for _, variable := range slices.Sorted(maps.Keys(f.starts)) {
			if name := f.starts[variable]; !exists(name) {
				errs = append(errs, fmt.Errorf("function %s starts state machine %q (%s): no statemachines/%s%s yet", f.name, name, variable, name, aslSuffix))
			}
		}
		for _, name := range f.continues {
			if !exists(name) {
				errs = append(errs, fmt.Errorf("function %s continues state machine %q: no statemachines/%s%s yet", f.name, name, name, aslSuffix))
			}
		}
	}
	return errors.Join(errs...)
}

// stateMachineName is the deployed name of the state machine name: fixed,
// so that its ARN is known without a reference to it and a function may
// both be invoked by a state machine and start it (a disruption task that
// continues its execution as new) without a dependency cycle. Names are at
// most 80 characters (CreateStateMachine); a long cluster name is replaced
// by its hash.
func stateMachineName(cluster, name string) string {
	n := "nodewright-" + cluster + "-" + name
	if len(n) <= 80 {
		return n
	}
	sum := sha256.Sum256([]byte(cluster))
	return "nodewright-" + hex.EncodeToString(sum[:6]) + "-" + name
}

// stateMachineARN is the ARN of the state machine name in this stack.
func stateMachineARN(d *deployment, name string) *string {
	return d.stack.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("states"),
		Resource:     jsii.String("stateMachine"),
		ResourceName: jsii.String(stateMachineName(d.props.Cluster.Name, name)),
		ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// executionARNs is the ARN pattern of every execution of the state machine
// name: arn:<partition>:states:<region>:<account>:execution:<machine>:*.
func executionARNs(d *deployment, name string) *string {
	return d.stack.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("states"),
		Resource:     jsii.String("execution"),
		ResourceName: jsii.String(stateMachineName(d.props.Cluster.Name, name) + ":*"),
		ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// Placeholder names a state machine may use. Each is filled with a
// deployed resource, and its use grants the state machine's role access.
func functionPlaceholder(fn string) string    { return camel(fn) + "FunctionArn" }
func queuePlaceholder(q string) string        { return camel(q) + "QueueUrl" }
func stateMachinePlaceholder(m string) string { return camel(m) + "StateMachineArn" }

const (
	placeholderCluster = "ClusterName"
	placeholderTable   = "TableName"
)

// substitution is one value a placeholder can take and what using it
// grants the state machine.
type substitution struct {
	value *string
	grant func(sm awsstepfunctions.StateMachine)
}

// substitutions are every placeholder the deployment can fill for the
// state machines files.
func substitutions(d *deployment, files []stateMachineFile) map[string]substitution {
	subs := map[string]substitution{
		placeholderCluster: {value: jsii.String(d.props.Cluster.Name)},
		placeholderTable: {value: d.table.TableName(), grant: func(sm awsstepfunctions.StateMachine) {
			grantTableItems(d, sm)
		}},
	}
	for name, f := range d.functions {
		subs[functionPlaceholder(name)] = substitution{value: f.fn.FunctionArn(), grant: func(sm awsstepfunctions.StateMachine) {
			// The unqualified ARN only: the definition invokes $LATEST.
			sm.AddToRolePolicy(statement("Invoke"+camel(name), []string{"lambda:InvokeFunction"}, []*string{f.fn.FunctionArn()}, nil))
		}}
	}
	for name, q := range d.queues {
		subs[queuePlaceholder(name)] = substitution{value: q.queue.QueueUrl(), grant: func(sm awsstepfunctions.StateMachine) {
			q.queue.GrantSendMessages(sm)
		}}
	}
	for _, f := range files {
		arn := stateMachineARN(d, f.name)
		subs[stateMachinePlaceholder(f.name)] = substitution{value: arn, grant: func(sm awsstepfunctions.StateMachine) {
			sm.AddToRolePolicy(statement("Start"+camel(f.name), []string{"states:StartExecution"}, []*string{arn}, nil))
		}}
	}
	return subs
}

// builtStateMachine is a deployed state machine.
type builtStateMachine struct {
	file stateMachineFile
	sm   awsstepfunctions.StateMachine
}

// newStateMachines deploys every file as a STANDARD state machine (an
// auditable execution history), logging every event with its data to a
// log group of its own and tracing with X-Ray. The definition is inline,
// so the template shows it. A placeholder the deployment cannot fill is an
// error naming the file and the placeholders it can.
func newStateMachines(d *deployment, files []stateMachineFile) error {
	subs := substitutions(d, files)
	var errs []error
	for _, f := range files {
		var missing []string
		values := map[string]*string{}
		for _, p := range f.placeholders {
			s, ok := subs[p]
			if !ok {
				missing = append(missing, "${"+p+"}")
				continue
			}
			values[p] = s.value
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("state machine %s: no substitution for %s (available: %s)",
				f.path, strings.Join(missing, ", "), strings.Join(slices.Sorted(maps.Keys(subs)), ", ")))
			continue
		}
		id := camel(f.name) + "StateMachine"
		lg := awslogs.NewLogGroup(d.scope, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
			Retention:     retention(d.props.LogRetentionDays),
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		})
		sm := awsstepfunctions.NewStateMachine(d.scope, jsii.String(id), &awsstepfunctions.StateMachineProps{
			StateMachineName:        jsii.String(stateMachineName(d.props.Cluster.Name, f.name)),
			Comment:                 jsii.String("nodewright " + f.name + " (statemachines/" + filepath.Base(f.path) + ")"),
			StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
			DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(jsii.String(f.body)),
			DefinitionSubstitutions: &values,
			Logs: &awsstepfunctions.LogOptions{
				Destination:          lg,
				Level:                awsstepfunctions.LogLevel_ALL,
				IncludeExecutionData: jsii.Bool(true),
			},
			TracingEnabled: jsii.Bool(true),
		})
		for _, p := range f.placeholders {
			if g := subs[p].grant; g != nil {
				g(sm)
			}
		}
		d.machines[f.name] = &builtStateMachine{file: f, sm: sm}
	}
	return errors.Join(errs...)
}
