package nodewright

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// triggerKind is what invokes a function; the zero kind is a function
// only state machines invoke (its ${<Name>FunctionArn} placeholder).
type triggerKind int

const (
	// triggerAPI: the intake API's routes (api.go), proxy integration.
	triggerAPI triggerKind = iota + 1
	// triggerQueue: an SQS event source mapping on trigger.queue with
	// ReportBatchItemFailures.
	triggerQueue
	// triggerSchedule: an EventBridge Scheduler schedule every
	// trigger.every (events.go).
	triggerSchedule
)

type trigger struct {
	kind      triggerKind
	queue     string        // triggerQueue: a queues.go name
	batchSize int           // triggerQueue
	every     time.Duration // triggerSchedule
}

// grant is one permission set a function needs; iam.go turns each into
// policy statements.
type grant int

const (
	// grantTable: read and write the table and its indexes.
	grantTable grant = iota + 1
	// grantSendProvisioning: send to the provisioning FIFO queue.
	grantSendProvisioning
	// grantResolve: the Describe calls of EC2NodeClass resolution
	// (subnets, security groups, AMIs, capacity reservations, placement
	// groups) and the public SSM parameters of
	// AMI aliases.
	grantResolve
	// grantLaunch: CreateFleet/RunInstances/CreateLaunchTemplate with the
	// cluster's request tags, tagging on creation, DescribeLaunchTemplates
	// and iam:PassRole of the node role (karpenter-spec 4.1).
	grantLaunch
	// grantListInstances: DescribeInstances, to list the cluster's
	// instances by tag.
	grantListInstances
	// grantTerminate: TerminateInstances on the cluster's instances
	// (those of NodeClaim records, adopted ones included).
	grantTerminate
	// grantTerminateOwned: TerminateInstances only on instances carrying
	// nodewright's ownership mark (garbage collection).
	grantTerminateOwned
	// grantDescribeInstanceStatus: DescribeInstanceStatus, to read the
	// status checks and scheduled events of the cluster's instances.
	grantDescribeInstanceStatus
	// grantTagInstances: CreateTags on the cluster's existing instances,
	// limited to the post-registration tag keys (karpenter-spec 4.1).
	grantTagInstances
	// grantCleanLaunchTemplates: DescribeLaunchTemplates, and
	// DeleteLaunchTemplate on the cluster's launch templates.
	grantCleanLaunchTemplates
	// grantReadEC2Data: the four read actions of the live EC2 data
	// refresh (DescribeInstanceTypes, DescribeInstanceTypeOfferings,
	// DescribeSpotPriceHistory, pricing:GetProducts).
	grantReadEC2Data
	// grantInstanceProfiles: iam:GetRole and iam:PassRole of the allowed
	// node roles, and creating, tagging and filling instance profiles
	// under nodewright's path with its ownership tags (EC2NodeClass
	// spec.role resolution).
	grantInstanceProfiles
	// grantCleanInstanceProfiles: listing, reading, emptying and deleting
	// the instance profiles under nodewright's path that carry its
	// ownership tag (garbage collection of deleted classes').
	grantCleanInstanceProfiles
)

// kubeAccess is a function's Kubernetes identity: its role gets an EKS
// access entry in group, which infra/kube/rbac.yaml binds to a ClusterRole
// of the same name.
type kubeAccess struct {
	group string
}

// env names a function's environment from the deployment.
type env func(d *deployment) map[string]*string

// functionSpec is one Lambda: one row of the table below.
type functionSpec struct {
	// name is the folder under functions/ and dist/.
	name        string
	description string
	memoryMiB   int
	timeout     time.Duration
	// singleWriter reserves one concurrent execution (when
	// Props.ReservedConcurrency): a second invocation, from anything,
	// would break the function's single-writer guarantee.
	singleWriter bool
	env          []env
	grants       []grant
	trigger      trigger
	// kube: the function calls the cluster's Kubernetes API; nil: never.
	kube *kubeAccess
	// starts maps an environment variable to the state machine
	// (workflows.go name) whose ARN it holds; the function may start
	// executions of exactly those state machines.
	starts map[string]string
	// continues are state machines the function starts executions of by
	// an ARN its input carries ($$.StateMachine.Id: continue-as-new).
	continues []string
	// describes maps a state machine to the environment variable holding
	// its ARN ("" when starts sets it already): the function reads the
	// status of that machine's executions (states:DescribeExecution).
	describes map[string]string
	// enabled reports whether props deploy the function; nil: always.
	enabled func(Props) bool
}

// functions is every Lambda nodewright deploys. A test fails when a
// functions/*/main.go has no row here; New fails when a row's
// dist/<name>/bootstrap is missing (run `make build`).
var functions = []functionSpec{
	{
		// API Gateway's integration timeout is 29 s; the intake answers
		// well before it.
		name:        "intake",
		description: "intake API: validates, dedupes and enqueues the forwarder's messages",
		memoryMiB:   512,
		timeout:     25 * time.Second,
		env:         []env{envCommon, envProvisioningQueue},
		grants:      []grant{grantTable, grantSendProvisioning},
		trigger:     trigger{kind: triggerAPI},
	},
	{
		// The solver fits 10,000 pods in 1 GiB (DESIGN.md section 3); twice
		// that buys Lambda CPU (1,769 MB is one vCPU). One solve at a time
		// per cluster comes from the FIFO message group (functions/
		// provisioner); the reserved concurrency of 1 keeps any other
		// invoker out too.
		name:         "provisioner",
		description:  "provisioner: solves pod batches and launches NodeClaims with CreateFleet; registers nodes",
		memoryMiB:    2048,
		timeout:      2 * time.Minute,
		singleWriter: true,
		env:          []env{envCommon, envKube, envNodeBootstrap, envFeatureGates, envIsolatedVPC, envNodeRoles},
		grants:       []grant{grantTable, grantResolve, grantLaunch, grantListInstances, grantTagInstances, grantInstanceProfiles},
		trigger:      trigger{kind: triggerQueue, queue: queueProvisioning, batchSize: 5},
		kube:         &kubeAccess{group: "nodewright:provisioner"},
	},
	{
		// Every step is idempotent and decided from fresh reads (functions/
		// gc), so overlapping runs are harmless: no reserved concurrency.
		name:        "gc",
		description: "garbage collection: launch/registration timeouts, leaked instances, orphaned Nodes",
		memoryMiB:   512,
		timeout:     50 * time.Second,
		env:         []env{envCommon, envKube, envIsolatedVPC, envNodeRoles},
		grants:      []grant{grantTable, grantListInstances, grantTerminateOwned, grantTagInstances, grantCleanLaunchTemplates, grantReadEC2Data, grantCleanInstanceProfiles},
		trigger:     trigger{kind: triggerSchedule, every: time.Minute},
		kube:        &kubeAccess{group: "nodewright:gc"},
	},
	{
		// Karpenter's disruption controller is a singleton (karpenter-spec
		// 12); the evaluation runs every minute and starts one execution
		// per command (budgets hold through DynamoDB leases regardless).
		// The solver simulates consolidations: memory as the provisioner.
		// At 5,000 nodes one run reads, lists and evaluates in about 7
		// CPU-seconds and 500 MiB live (sizing_test.go holds the figures).
		// It reads the cluster from the forwarder's snapshot, resolves node
		// classes and lists instances for drift, and reaches the cluster
		// only to give back the nodes of executions that stopped unfinished
		// (functions/disruption, termination.ReleaseStale).
		name:         "disruption",
		description:  "disruption: emptiness, drift, expiration and consolidation decisions; starts disruption executions",
		memoryMiB:    2048,
		timeout:      50 * time.Second,
		singleWriter: true,
		env:          []env{envCommon, envKube, envDrift, envFeatureGates, envIsolatedVPC, envNodeRoles},
		grants:       []grant{grantTable, grantResolve, grantListInstances, grantInstanceProfiles},
		trigger:      trigger{kind: triggerSchedule, every: time.Minute},
		kube:         &kubeAccess{group: "nodewright:disruption"},
		starts:       map[string]string{"STATE_MACHINE_ARN": "disruption"},
		// The stale-lease sweep hands a node back only once the
		// execution holding it has ended (termination.ReleaseStale).
		describes: map[string]string{"disruption": "", "interruption": "INTERRUPTION_STATE_MACHINE_ARN"},
	},
	{
		// An operator's manual replacement (POST /v1/replacements,
		// nodewright replace) plans over the same reads as the
		// disruption evaluation (functions/decider.Replace)
		// and starts Manual executions of the disruption state machine:
		// the decider's memory, the intake's timeout (API Gateway's
		// integration timeout is 29 s). Starts are idempotent by name, so
		// overlapping requests are harmless: no reserved concurrency.
		// states:StartExecution cannot be narrowed to the manual-
		// executions: its resource is the state machine.
		name:        "replace",
		description: "replace: an operator's audited manual replacement of nodes; starts Manual disruption executions",
		memoryMiB:   2048,
		timeout:     25 * time.Second,
		env:         []env{envCommon, envDrift, envFeatureGates, envNodeRoles},
		grants:      []grant{grantTable, grantResolve, grantListInstances, grantInstanceProfiles},
		trigger:     trigger{kind: triggerAPI},
		starts:      map[string]string{"STATE_MACHINE_ARN": "disruption"},
	},
	{
		// The task Lambda of both state machines (statemachines/*.asl.json,
		// ${DisrupttaskFunctionArn}): one step per invocation, the longest
		// (a drain round) bounded by its task's TimeoutSeconds of 300.
		name:        "disrupttask",
		description: "disruption and interruption steps: budgets, replacements, taint, drain, terminate, delete, rollback",
		memoryMiB:   1024,
		timeout:     290 * time.Second,
		env:         []env{envCommon, envKube, envNodeBootstrap, envNodeRoles},
		grants:      []grant{grantTable, grantResolve, grantLaunch, grantTerminate, grantInstanceProfiles},
		kube:        &kubeAccess{group: "nodewright:disrupttask"},
		continues:   []string{"disruption", "interruption"},
	},
	{
		// Karpenter handles 10 interruption messages at once (karpenter-spec
		// 8.2); so does one invocation (functions/interruption).
		name:        "interruption",
		description: "interruption: Spot warnings, rebalance, state changes and scheduled changes from the interruption queue",
		memoryMiB:   256,
		timeout:     30 * time.Second,
		env:         []env{envCommon},
		grants:      []grant{grantTable},
		trigger:     trigger{kind: triggerQueue, queue: queueInterruption, batchSize: 10},
		starts:      map[string]string{"STATE_MACHINE_ARN": "interruption"},
		enabled:     func(p Props) bool { return p.Interruption },
	},
	{
		// Karpenter polls DescribeInstanceStatus every minute whether or not
		// the interruption queue is configured (karpenter-spec 8.2), so the
		// row has no enabled gate. Each effect is idempotent per occurrence
		// (functions/instancestatus), so overlapping runs are harmless: no
		// reserved concurrency.
		name:        "instancestatus",
		description: "instance status: impaired status checks and scheduled events (DescribeInstanceStatus); starts interruption executions",
		memoryMiB:   256,
		timeout:     50 * time.Second,
		env:         []env{envCommon},
		grants:      []grant{grantTable, grantDescribeInstanceStatus},
		trigger:     trigger{kind: triggerSchedule, every: time.Minute},
		starts:      map[string]string{"STATE_MACHINE_ARN": "interruption"},
	},
}

func envCommon(d *deployment) map[string]*string {
	return map[string]*string{
		"CLUSTER_NAME": jsii.String(d.props.Cluster.Name),
		"TABLE_NAME":   d.table.TableName(),
		"LOG_LEVEL":    jsii.String(d.props.LogLevel),
	}
}

func envKube(d *deployment) map[string]*string {
	return map[string]*string{
		"CLUSTER_ENDPOINT": d.cluster.endpoint,
		"CLUSTER_CA_DATA":  d.cluster.caData,
	}
}

// envNodeBootstrap is what nodes' user data and AMI aliases need.
func envNodeBootstrap(d *deployment) map[string]*string {
	m := map[string]*string{
		"KUBERNETES_VERSION": d.cluster.version,
		"SERVICE_CIDR":       d.cluster.serviceCIDR,
	}
	if d.props.Cluster.DNS != "" {
		m["CLUSTER_DNS"] = jsii.String(d.props.Cluster.DNS)
	}
	return m
}

// envDrift is what the EC2NodeClass drift hash and AMI aliases need: the
// CA bundle is part of Karpenter's static-drift hash.
func envDrift(d *deployment) map[string]*string {
	return map[string]*string{
		"KUBERNETES_VERSION": d.cluster.version,
		"CLUSTER_CA_DATA":    d.cluster.caData,
	}
}

// envNodeRoles are the node roles an EC2NodeClass's spec.role may name
// (launch.ParseNodeRoles reads them): the deployment's node role and
// Props.NodeRoles as NODE_ROLE_ARNS, Props.NodeRolePathPrefix as
// NODE_ROLE_PATH_PREFIX.
func envNodeRoles(d *deployment) map[string]*string {
	m := map[string]*string{"NODE_ROLE_ARNS": jsii.String(strings.Join(d.nodeRoleARNs(), ","))}
	if d.props.NodeRolePathPrefix != "" {
		m["NODE_ROLE_PATH_PREFIX"] = jsii.String(d.props.NodeRolePathPrefix)
	}
	return m
}

func envFeatureGates(d *deployment) map[string]*string {
	if len(d.props.FeatureGates) == 0 {
		return nil
	}
	return map[string]*string{"FEATURE_GATES": jsii.String(d.props.featureGates())}
}

// envIsolatedVPC passes Props.IsolatedVPC to the live EC2 data refresher
// (functions/gc reads ISOLATED_VPC) and to the provisioner and disruption
// Lambdas (their EC2DataLive condition); unset when false, the Lambdas'
// default.
func envIsolatedVPC(d *deployment) map[string]*string {
	if !d.props.IsolatedVPC {
		return nil
	}
	return map[string]*string{"ISOLATED_VPC": jsii.String("true")}
}

func envProvisioningQueue(d *deployment) map[string]*string {
	return map[string]*string{"QUEUE_URL": d.queues[queueProvisioning].queue.QueueUrl()}
}

// enabledFunctions returns the rows props deploy, in table order.
func enabledFunctions(p Props) []functionSpec {
	var out []functionSpec
	for _, f := range functions {
		if f.enabled == nil || f.enabled(p) {
			out = append(out, f)
		}
	}
	return out
}

// bootstrapPath is where `make build` puts a function's binary.
func bootstrapPath(dist, name string) string { return filepath.Join(dist, name, "bootstrap") }

// checkFunctionAssets fails, naming every missing file, when a function
// has no bootstrap. Nothing is invented in its place.
func checkFunctionAssets(dist string, specs []functionSpec) error {
	var errs []error
	for _, f := range specs {
		p := bootstrapPath(dist, f.name)
		st, err := os.Stat(p)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("function %s: %w (build it with `make build`; functions/%s/main.go must exist)", f.name, err, f.name))
		case !st.Mode().IsRegular():
			errs = append(errs, fmt.Errorf("function %s: %s is not a regular file", f.name, p))
		}
	}
	return errors.Join(errs...)
}

// builtFunction is a deployed function and its role.
type builtFunction struct {
	spec     functionSpec
	fn       awslambda.Function
	role     awsiam.Role
	logGroup awslogs.LogGroup
}

// newFunction creates spec's function with a role of its own that can
// write only to the function's own log group, the log group with the
// deployment's retention, and the environment of spec.env. Grants and
// triggers are added by iam.go and events.go.
func newFunction(d *deployment, spec functionSpec) {
	id := camel(spec.name)
	lg := awslogs.NewLogGroup(d.scope, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     retention(d.props.LogRetentionDays),
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	role := awsiam.NewRole(d.scope, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("nodewright " + spec.name + " Lambda"),
		InlinePolicies: &map[string]awsiam.PolicyDocument{
			"Runtime": awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: runtimeStatements(d, spec, lg)}),
		},
	})
	environment := map[string]*string{}
	for _, e := range spec.env {
		for k, v := range e(d) {
			if v != nil { // an optional setting nobody gave
				environment[k] = v
			}
		}
	}
	for variable, machine := range spec.starts {
		arn := stateMachineARN(d, machine)
		environment[variable] = arn
		role.AddToPrincipalPolicy(statement("Start"+camel(machine), []string{"states:StartExecution"}, []*string{arn}, nil))
	}
	for _, machine := range slices.Sorted(maps.Keys(spec.describes)) {
		if variable := spec.describes[machine]; variable != "" {
			environment[variable] = stateMachineARN(d, machine)
		}
		role.AddToPrincipalPolicy(statement("Describe"+camel(machine)+"Executions", []string{"states:DescribeExecution"}, []*string{executionARNs(d, machine)}, nil))
	}
	for _, machine := range spec.continues {
		role.AddToPrincipalPolicy(statement("Continue"+camel(machine), []string{"states:StartExecution"}, []*string{stateMachineARN(d, machine)}, nil))
	}
	var reserved *float64
	if spec.singleWriter && d.props.ReservedConcurrency {
		reserved = jsii.Number(1)
	}
	fn := awslambda.NewFunction(d.scope, jsii.String(id), &awslambda.FunctionProps{
		Description:                  jsii.String("nodewright " + spec.description),
		Runtime:                      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:                 awslambda.Architecture_ARM_64(),
		Handler:                      jsii.String("bootstrap"),
		Code:                         awslambda.Code_FromAsset(jsii.String(filepath.Dir(bootstrapPath(d.props.Assets.DistDir, spec.name))), nil),
		MemorySize:                   jsii.Number(float64(spec.memoryMiB)),
		Timeout:                      awscdk.Duration_Seconds(jsii.Number(spec.timeout.Seconds())),
		Environment:                  &environment,
		Role:                         role,
		LogGroup:                     lg,
		ReservedConcurrentExecutions: reserved,
		RecursiveLoop:                awslambda.RecursiveLoop_TERMINATE,
	})
	if spec.kube != nil && d.props.Network != nil {
		placeInVPC(d, fn)
	}
	d.functions[spec.name] = &builtFunction{spec: spec, fn: fn, role: role, logGroup: lg}
}

// runtimeStatements are what the Lambda service needs for the function to
// run: its own log group (the group exists, so no logs:CreateLogGroup),
// and, in a VPC, the network interfaces.
func runtimeStatements(d *deployment, spec functionSpec, lg awslogs.LogGroup) *[]awsiam.PolicyStatement {
	st := []awsiam.PolicyStatement{
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("WriteOwnLogs"),
			Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
			Resources: &[]*string{lg.LogGroupArn()},
		}),
	}
	if spec.kube != nil && d.props.Network != nil {
		st = append(st, vpcAccessStatements()...)
	}
	return &st
}

// camel turns a table name ("drain-node") into a construct ID fragment
// ("DrainNode").
func camel(name string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// envName turns a table name into an environment-variable fragment
// ("drain-node" -> "DRAIN_NODE").
func envName(name string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// retention is the CDK name of a validated retention (Props.Validate).
func retention(days int) awslogs.RetentionDays { return logRetentionDays[days] }

// functionNames returns the names of the table's rows, sorted.
func functionNames() []string {
	var out []string
	for _, f := range functions {
		out = append(out, f.name)
	}
	slices.Sort(out)
	return out
}
