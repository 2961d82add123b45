package nodewright

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// apiStage is the deployed stage: the forwarder's API_ENDPOINT ends in it.
const apiStage = "prod"

// apiRoute is one route of the forwarder <-> intake contract
// (shared/apis/v1 podbatch.go; a test checks every Route* path of that
// file is here), or of the operator's replacement route
// (shared/apis/v1 replacement.go).
type apiRoute struct {
	method string
	path   string
	// function serves the route; "" is the intake.
	function string
	// operators: IAM principals of the deployment's account whose
	// identity policies allow it may call the route; the forwarder may
	// not. Otherwise only the forwarder may.
	operators bool
}

var apiRoutes = []apiRoute{
	{method: "POST", path: "/v1/podbatches"},
	{method: "GET", path: "/v1/podbatches/{id}"},
	{method: "POST", path: "/v1/config"},
	{method: "POST", path: "/v1/registrations"},
	snapshotRoute,
	{method: "GET", path: "/v1/nodeclaims"},
	{method: "GET", path: "/v1/events"},
	{method: "GET", path: "/v1/nodeclasses"},
	// The forwarder's poll: the three GETs above in one request; a part
	// too large for one answer is still read from its own route.
	{method: "GET", path: "/v1/sync"},
	{method: "GET", path: "/v1/metrics"},
	replacementsRoute,
}

// replacementsRoute is an operator's audited manual replacement
// (nodewright replace; functions/replace).
var replacementsRoute = apiRoute{method: "POST", path: "/v1/replacements", function: "replace", operators: true}

// routeFunction is the function serving r.
func (r apiRoute) routeFunction() string {
	if r.function == "" {
		return "intake"
	}
	return r.function
}

// snapshotRoute receives the forwarder's cluster snapshots, at least every
// 30 s from a live leader (forwarder/internal/forward SnapshotInterval).
var snapshotRoute = apiRoute{method: "POST", path: "/v1/snapshots"}

// Stage throttling: the forwarder posts about one pod batch a second at
// most, plus snapshot parts; these bound a runaway client.
const (
	apiRateLimit  = 50
	apiBurstLimit = 100
)

// newAPI creates the intake API: a regional REST API whose only routes are
// apiRoutes, each proxied to the function serving it, with IAM
// authorization on every method and a resource policy that denies every
// caller but the forwarder's role, except on the operators' routes, which
// only principals of the deployment's account may call (their identity
// policies decide which) and the forwarder may not. Access logs go to a
// log group of its own with the deployment's retention.
func newAPI(d *deployment, specs []functionSpec) awsapigateway.RestApi {
	forwarder := d.forwarder.RoleArn()
	var operatorRoutes []string
	for _, r := range apiRoutes {
		if r.operators {
			operatorRoutes = append(operatorRoutes, "execute-api:/*/"+r.method+r.path)
		}
	}
	statements := []awsiam.PolicyStatement{
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("ForwarderOnly"),
			Principals: &[]awsiam.IPrincipal{awsiam.NewArnPrincipal(forwarder)},
			Actions:    jsii.Strings("execute-api:Invoke"),
			Resources:  jsii.Strings("execute-api:/*"),
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:          jsii.String("DenyEveryoneElse"),
			Effect:       awsiam.Effect_DENY,
			Principals:   &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:      jsii.Strings("execute-api:Invoke"),
			NotResources: jsii.Strings(operatorRoutes...),
			Conditions:   &map[string]any{"StringNotEquals": map[string]any{"aws:PrincipalArn": forwarder}},
		}),
	}
	if len(operatorRoutes) > 0 {
		statements = append(statements,
			awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:        jsii.String("OperatorsOfTheAccount"),
				Principals: &[]awsiam.IPrincipal{awsiam.NewAccountRootPrincipal()},
				Actions:    jsii.Strings("execute-api:Invoke"),
				Resources:  jsii.Strings(operatorRoutes...),
			}),
			awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:        jsii.String("NotTheForwarder"),
				Effect:     awsiam.Effect_DENY,
				Principals: &[]awsiam.IPrincipal{awsiam.NewArnPrincipal(forwarder)},
				Actions:    jsii.Strings("execute-api:Invoke"),
				Resources:  jsii.Strings(operatorRoutes...),
			}))
	}
	policy := awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &statements})
	accessLogs := awslogs.NewLogGroup(d.scope, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     retention(d.props.LogRetentionDays),
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	api := awsapigateway.NewRestApi(d.scope, jsii.String("Api"), &awsapigateway.RestApiProps{
		Description:    jsii.String("nodewright intake API of cluster " + d.props.Cluster.Name + " (forwarder only)"),
		EndpointTypes:  &[]awsapigateway.EndpointType{awsapigateway.EndpointType_REGIONAL},
		Policy:         policy,
		CloudWatchRole: jsii.Bool(false),
		DefaultMethodOptions: &awsapigateway.MethodOptions{
			AuthorizationType: awsapigateway.AuthorizationType_IAM,
		},
		DeployOptions: &awsapigateway.StageOptions{
			StageName:            jsii.String(apiStage),
			AccessLogDestination: awsapigateway.NewLogGroupLogDestination(accessLogs),
			AccessLogFormat: awsapigateway.AccessLogFormat_JsonWithStandardFields(&awsapigateway.JsonWithStandardFieldProps{
				Caller: jsii.Bool(true), HttpMethod: jsii.Bool(true), Ip: jsii.Bool(true), Protocol: jsii.Bool(true),
				RequestTime: jsii.Bool(true), ResourcePath: jsii.Bool(true), ResponseLength: jsii.Bool(true),
				Status: jsii.Bool(true), User: jsii.Bool(true),
			}),
			ThrottlingRateLimit:  jsii.Number(apiRateLimit),
			ThrottlingBurstLimit: jsii.Number(apiBurstLimit),
			// Per-method metrics for the snapshot route only, which the
			// forwarder-silent alarm reads (monitoring.go). A method's
			// settings replace the stage's for it, so the throttling is
			// repeated.
			MethodOptions: &map[string]*awsapigateway.MethodDeploymentOptions{
				snapshotRoute.path + "/" + snapshotRoute.method: {
					MetricsEnabled:       jsii.Bool(true),
					ThrottlingRateLimit:  jsii.Number(apiRateLimit),
					ThrottlingBurstLimit: jsii.Number(apiBurstLimit),
				},
			},
		},
	})
	integrations := map[string]awsapigateway.LambdaIntegration{}
	for _, spec := range specs {
		if spec.trigger.kind == triggerAPI {
			integrations[spec.name] = awsapigateway.NewLambdaIntegration(d.functions[spec.name].fn, &awsapigateway.LambdaIntegrationOptions{
				Proxy: jsii.Bool(true),
				// One permission per function for the whole API instead
				// of one per method.
				ScopePermissionToMethod: jsii.Bool(false),
			})
		}
	}
	for _, r := range apiRoutes {
		api.Root().ResourceForPath(jsii.String(r.path)).AddMethod(jsii.String(r.method), integrations[r.routeFunction()], nil)
	}
	return api
}

// checkAPIFunctions checks that every route's function is deployed and
// API-triggered, and that every API-triggered function serves a route.
func checkAPIFunctions(specs []functionSpec) error {
	api := map[string]bool{}
	for _, f := range specs {
		if f.trigger.kind == triggerAPI {
			api[f.name] = false
		}
	}
	for _, r := range apiRoutes {
		if _, ok := api[r.routeFunction()]; !ok {
			return fmt.Errorf("functions table: route %s %s is served by %q, which is not a deployed API function", r.method, r.path, r.routeFunction())
		}
		api[r.routeFunction()] = true
	}
	for name, serves := range api {
		if !serves {
			return fmt.Errorf("functions table: API function %s serves no route", name)
		}
	}
	return nil
}
