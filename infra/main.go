// Command infra is the CDK app that deploys nodewright for one EKS cluster:
//
//	make build && cdk deploy -c clusterName=<cluster>
//
// It reads its settings once, from the CDK context (config.go lists the
// keys) and the CDK CLI's CDK_DEFAULT_ACCOUNT/CDK_DEFAULT_REGION, creates
// one stack holding the nodewright construct (package nodewright), checks
// it with cdk-nag's AwsSolutions pack (an unsuppressed finding fails the
// synth) and synthesizes it. Lambda code comes from dist/ (`make build`),
// state machines from statemachines/, the table schema from
// shared/aws/ddbstore/schema.json: it imports nothing from the runtime
// module.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/nodewright/nodewright/infra/nodewright"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "nodewright infra:", err)
		os.Exit(1)
	}
}

func run() error {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	dir, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	cfg, err := loadConfig(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) }, os.Getenv, dir)
	if err != nil {
		return err
	}
	var env *awscdk.Environment
	if cfg.account != "" || cfg.region != "" {
		env = &awscdk.Environment{Account: optional(cfg.account), Region: optional(cfg.region)}
	}
	stack := awscdk.NewStack(app, jsii.String(cfg.stackName), &awscdk.StackProps{
		Env:         env,
		Description: jsii.String("nodewright: serverless Karpenter-compatible node provisioning for EKS cluster " + cfg.props.Cluster.Name),
	})
	if _, err := nodewright.New(stack, "Nodewright", cfg.props); err != nil {
		return err
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
	return nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return jsii.String(s)
}
