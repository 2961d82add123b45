package nodewright

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecr"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Props configures one deployment of nodewright, for one EKS cluster.
type Props struct {
	// Cluster names the EKS cluster and how its Lambdas reach it.
	Cluster Cluster
	// Assets locates the files the construct deploys.
	Assets Assets
	// Network, when set, places the Lambdas that call the cluster's
	// Kubernetes API in these subnets (needed when the endpoint is private).
	Network *Network
	// NodeRoleName is an existing IAM role for the nodes (for instance
	// Karpenter's KarpenterNodeRole-<cluster> when migrating). Empty: the
	// construct creates the role and its EKS access entry (EC2_LINUX).
	// Either way an EC2NodeClass's spec.role may name it: nodewright creates
	// the class's instance profile for it (shared/launch).
	NodeRoleName string
	// NodeRoles are further roles an EC2NodeClass's spec.role may name,
	// each with an EKS access entry of its type (EC2_LINUX, or
	// EC2_WINDOWS for Windows nodes). iam:PassRole and iam:GetRole are
	// granted on exactly the node role, these and NodeRolePathPrefix's.
	NodeRoles []NodeRole
	// NodeRolePathPrefix, when set ("/nodes/"), also allows every role
	// under this IAM path. Such roles get no access entry from the stack
	// (their names are not known at deploy time): create theirs with
	// the role.
	NodeRolePathPrefix string
	// ForwarderOIDCProviderARN, when set, makes the forwarder's role
	// assumable through IRSA with this IAM OIDC provider (the cluster's);
	// empty uses EKS Pod Identity (a pod identity association).
	ForwarderOIDCProviderARN string
	// Interruption deploys the interruption queue, its EventBridge rules
	// and the interruption Lambda (Karpenter's --interruption-queue).
	Interruption bool
	// FeatureGates are Karpenter's feature gates (karpenter-spec 10.3),
	// passed to the deciding Lambdas as FEATURE_GATES
	// ("Name=true,Name=false", sorted by name).
	FeatureGates map[string]bool
	// LogRetentionDays is the retention of every log group; one of the
	// values CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, ...).
	LogRetentionDays int
	// LogLevel is the Lambdas' LOG_LEVEL: debug, info, warn or error.
	LogLevel string
	// ReservedConcurrency reserves one concurrent execution for each
	// single-writer function (functions.go). Accounts whose concurrency
	// limit is the new-account 10 cannot reserve any; set false there.
	ReservedConcurrency bool
	// AlarmTopicARN, when set, is an SNS topic every alarm notifies.
	AlarmTopicARN string
	// Dashboard deploys the CloudWatch dashboard (monitoring.go); it costs
	// $3 a month (docs/cost.md), so the default is false. The alarms are
	// deployed either way.
	Dashboard bool
	// IsolatedVPC is Karpenter's ISOLATED_VPC (karpenter-spec, settings):
	// the VPC has no route to the Price List API, so the live EC2 data
	// refresh never calls pricing:GetProducts and on-demand prices stay the
	// embedded tables. Passed to the refresher (gc) as ISOLATED_VPC=true;
	// the gc role then has no pricing:GetProducts grant. Default false.
	IsolatedVPC bool
}

// NodeRole is an allowed node role (Props.NodeRoles).
type NodeRole struct {
	// ARN is the role's ARN (arn:<partition>:iam::<account>:role/<path><name>).
	ARN string
	// Windows gives its access entry the EC2_WINDOWS type (Windows
	// nodes); false: EC2_LINUX.
	Windows bool
}

// Cluster identifies the EKS cluster.
type Cluster struct {
	// Name is the EKS cluster name (required).
	Name string
	// Endpoint (https URL), CAData (base64 PEM, as EKS's
	// certificateAuthority.data) and KubernetesVersion ("1.33") are the
	// cluster's; when any is empty, a deploy-time eks:DescribeCluster call
	// fills all three and ServiceCIDR.
	Endpoint          string
	CAData            string
	KubernetesVersion string
	// ServiceCIDR is the cluster's service IPv4 CIDR (AL2023 user data);
	// optional when the three above are given.
	ServiceCIDR string
	// DNS is the kube-dns ClusterIP; empty lets the AMI decide.
	DNS string
	// SecurityGroupID, with Network, is the cluster security group; the
	// construct lets the Lambdas' security group reach it on 443.
	SecurityGroupID string
}

// Network places Lambdas in a VPC.
type Network struct {
	// SubnetIDs are private subnets with a route to the EKS endpoint and to
	// the AWS APIs the Lambdas call (NAT or VPC endpoints). Required.
	SubnetIDs []string
	// SecurityGroupIDs are the Lambdas' security groups; empty creates one
	// in VPCID allowing only outbound HTTPS.
	SecurityGroupIDs []string
	// VPCID is required when SecurityGroupIDs is empty.
	VPCID string
}

// Assets are paths (absolute, or relative to the process's working
// directory) of the files the construct deploys.
type Assets struct {
	// DistDir holds <function>/bootstrap for every function (`make build`).
	DistDir string
	// StateMachineDir holds the *.asl.json definitions.
	StateMachineDir string
	// TableSchema is the ddbstore schema.json.
	TableSchema string
}

// Nodewright is the deployed system. Its fields give other constructs
// access to what New created.
type Nodewright struct {
	constructs.Construct
	// API is the intake API; APIEndpoint its base URL with the stage (the
	// forwarder's API_ENDPOINT).
	API         awsapigateway.RestApi
	APIEndpoint *string
	// Table is the DynamoDB table.
	Table awsdynamodb.Table
	// Functions are the Lambdas by table name (functions.go).
	Functions map[string]awslambda.Function
	// StateMachines are the state machines by name (file name without
	// .asl.json).
	StateMachines map[string]awsstepfunctions.StateMachine
	// ForwarderRole is the forwarder's role (execute-api:Invoke on API).
	ForwarderRole awsiam.Role
	// NodeRoleName is the nodes' role; EC2NodeClass spec.role names it.
	NodeRoleName *string
}

// Kubernetes identities of the forwarder (forwarder/deploy).
const (
	forwarderNamespace      = "nodewright"
	forwarderServiceAccount = "nodewright-forwarder"
)

// Karpenter's feature gates (karpenter-spec 10.3; AWS_FEATURE_GATES adds
// NodeClassCEL).
var knownFeatureGates = []string{
	"CapacityBuffer", "NodeClassCEL", "NodeOverlay", "NodeRepair", "ReservedCapacity",
	"SpotToSpotConsolidation", "StaticCapacity",
}

// logRetentionDays are the retentions CloudWatch Logs accepts
// (PutRetentionPolicy, retentionInDays), as CDK names them.
var logRetentionDays = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

// roleARNRE matches an IAM role ARN.
var roleARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/([\x21-\x7E]+/)?[\w+=,.@-]{1,64}$`)

// clusterNameRE is EKS's cluster-name pattern (CreateCluster).
var clusterNameRE = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`)

// Validate reports every problem with p at once.
func (p Props) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !clusterNameRE.MatchString(p.Cluster.Name) {
		bad("cluster name %q: must match %s", p.Cluster.Name, clusterNameRE)
	}
	if p.Cluster.Endpoint != "" && !strings.HasPrefix(p.Cluster.Endpoint, "https://") {
		bad("cluster endpoint %q: must be an https URL", p.Cluster.Endpoint)
	}
	if p.Assets.DistDir == "" || p.Assets.StateMachineDir == "" || p.Assets.TableSchema == "" {
		bad("assets: DistDir, StateMachineDir and TableSchema are required")
	}
	if n := p.Network; n != nil {
		if len(n.SubnetIDs) == 0 {
			bad("network: at least one subnet ID is required")
		}
		if len(n.SecurityGroupIDs) == 0 && n.VPCID == "" {
			bad("network: a VPC ID is required to create the Lambdas' security group")
		}
	}
	if p.Cluster.SecurityGroupID != "" && p.Network == nil {
		bad("cluster security group %s: only meaningful with a network", p.Cluster.SecurityGroupID)
	}
	for _, name := range slices.Sorted(maps.Keys(p.FeatureGates)) {
		if !slices.Contains(knownFeatureGates, name) {
			bad("feature gate %q: unknown (known: %s)", name, strings.Join(knownFeatureGates, ", "))
		}
	}
	if _, ok := logRetentionDays[p.LogRetentionDays]; !ok {
		bad("log retention %d days: must be one of %v", p.LogRetentionDays, slices.Sorted(maps.Keys(logRetentionDays)))
	}
	switch p.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log level %q: must be debug, info, warn or error", p.LogLevel)
	}
	for i, r := range p.NodeRoles {
		if !roleARNRE.MatchString(r.ARN) {
			bad("node roles[%d] %q: not an IAM role ARN (arn:<partition>:iam::<account>:role/<name>)", i, r.ARN)
		}
		for _, o := range p.NodeRoles[:i] {
			if o.ARN == r.ARN {
				bad("node roles[%d] %q: listed twice", i, r.ARN)
			}
		}
	}
	if pp := p.NodeRolePathPrefix; pp != "" && (!strings.HasPrefix(pp, "/") || !strings.HasSuffix(pp, "/") || pp == "/") {
		bad("node role path prefix %q: must begin and end with / and not be / alone (that allows every role)", pp)
	}
	if p.ForwarderOIDCProviderARN != "" && !strings.Contains(p.ForwarderOIDCProviderARN, ":oidc-provider/") {
		bad("forwarder OIDC provider %q: not an IAM OIDC provider ARN", p.ForwarderOIDCProviderARN)
	}
	return errors.Join(errs...)
}

// featureGates renders FeatureGates the way Karpenter's FEATURE_GATES
// setting reads them.
func (p Props) featureGates() string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(p.FeatureGates)) {
		parts = append(parts, fmt.Sprintf("%s=%t", name, p.FeatureGates[name]))
	}
	return strings.Join(parts, ",")
}

// deployment carries what New has built so far to the builders of the
// other files.
type deployment struct {
	scope   constructs.Construct
	props   Props
	stack   awscdk.Stack
	cluster clusterInfo
	table   awsdynamodb.Table
	// tableIndexes are the table's index names.
	tableIndexes []string
	// tableAccess is, per function name, the partition keys its role is
	// limited to (schema.json's access).
	tableAccess map[string]tableAccess
	queues      map[string]*queuePair
	functions   map[string]*builtFunction
	machines    map[string]*builtStateMachine
	nodeRole    nodeRole
	forwarder   awsiam.Role
	api         awsapigateway.RestApi
	// deadLetters is the one standard dead-letter queue (queues.go
	// standardDeadLetters): the interruption queue's failed messages, the
	// interruption events EventBridge could not deliver and the schedule
	// invocations EventBridge Scheduler could not deliver; nil until a
	// builder asks for it.
	deadLetters awssqs.Queue
	// image is the forwarder image's ECR repository (image.go).
	image awsecr.Repository
}

// New creates nodewright for props.Cluster inside a new construct id of
// scope. scope must be inside a Stack. It returns an error naming every
// invalid prop, or the first asset that is missing or inconsistent.
func New(scope constructs.Construct, id string, props Props) (*Nodewright, error) {
	if err := props.Validate(); err != nil {
		return nil, fmt.Errorf("nodewright props: %w", err)
	}
	schema, err := readTableSchema(props.Assets.TableSchema)
	if err != nil {
		return nil, err
	}
	machines, err := readStateMachines(props.Assets.StateMachineDir)
	if err != nil {
		return nil, err
	}
	specs := enabledFunctions(props)
	if err := checkAPIFunctions(specs); err != nil {
		return nil, err
	}
	if err := checkFunctionAssets(props.Assets.DistDir, specs); err != nil {
		return nil, err
	}
	if err := checkStarts(specs, machines); err != nil {
		return nil, err
	}

	c := constructs.NewConstruct(scope, jsii.String(id))
	d := &deployment{
		scope:     c,
		props:     props,
		stack:     awscdk.Stack_Of(c),
		queues:    map[string]*queuePair{},
		functions: map[string]*builtFunction{},
		machines:  map[string]*builtStateMachine{},
	}
	d.cluster = newClusterInfo(d)
	d.table = newTable(d, schema)
	d.tableAccess = schema.Access
	for _, ix := range schema.Indexes {
		d.tableIndexes = append(d.tableIndexes, ix.Name)
	}
	newQueues(d, specs)
	d.nodeRole = newNodeRole(d)
	for _, spec := range specs {
		newFunction(d, spec)
		applyGrants(d, d.functions[spec.name])
	}
	if err := newStateMachines(d, machines); err != nil {
		return nil, err
	}
	d.forwarder = newForwarderRole(d)
	d.api = newAPI(d, specs)
	d.image = newImageRepository(d)
	grantForwarder(d)
	newTriggers(d, specs)
	newInterruptionRules(d)
	newAccessEntries(d, specs)
	newMonitoring(d)
	addSuppressions(d)
	newOutputs(d)

	out := &Nodewright{
		Construct:     c,
		API:           d.api,
		APIEndpoint:   d.api.Url(),
		Table:         d.table,
		Functions:     map[string]awslambda.Function{},
		StateMachines: map[string]awsstepfunctions.StateMachine{},
		ForwarderRole: d.forwarder,
		NodeRoleName:  d.nodeRole.name,
	}
	for name, f := range d.functions {
		out.Functions[name] = f.fn
	}
	for name, m := range d.machines {
		out.StateMachines[name] = m.sm
	}
	return out, nil
}

// newOutputs exports what the operator needs after `cdk deploy`.
func newOutputs(d *deployment) {
	out := func(id, desc string, value *string) {
		awscdk.NewCfnOutput(d.scope, jsii.String(id), &awscdk.CfnOutputProps{Description: jsii.String(desc), Value: value})
	}
	// This output replaces the RestApi's own, which has no description.
	d.api.Node().TryRemoveChild(jsii.String("Endpoint"))
	out("ApiEndpoint", "the forwarder's API_ENDPOINT (infra/kube configMapGenerator)", d.api.Url())
	out("ForwarderRoleArn", "the forwarder's IAM role (Pod Identity association or IRSA annotation)", d.forwarder.RoleArn())
	out("NodeRoleName", "the nodes' IAM role: EC2NodeClass spec.role", d.nodeRole.name)
	out("TableName", "the DynamoDB table", d.table.TableName())
	out("ForwarderImageRepositoryUri", "the forwarder image's ECR repository (make image-push IMAGE=...)", d.image.RepositoryUri())
	out("ImagePushCommand", "log in to ECR and push the forwarder image built by make image (run from the repository)", imagePushCommand(d, d.image))
	out("HelmInstallCommand", "install the in-cluster part with every value filled in (run from the repository after the push)", helmInstallCommand(d, d.image.RepositoryUri()))
}
