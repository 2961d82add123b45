// Command replace is the Lambda behind POST /v1/replacements: an operator's
// audited manual replacement of nodes (nodewright replace; see package
// handler).
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodewright/nodewright/functions/decider"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	"github.com/nodewright/nodewright/functions/replace/handler"
)

func main() { lambdakit.Main(wire) }

// wire builds the decider from the disruption Lambda's environment
// (decider.LoadConfig) without a cluster client: planning reads the
// forwarder's snapshot, never the cluster.
func wire(_ context.Context, awsCfg aws.Config) (any, error) {
	cfg, err := decider.LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	log := lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "replace")
	d, err := decider.New(cfg, decider.Clients{
		DynamoDB: dynamodb.NewFromConfig(awsCfg),
		EC2:      ec2.NewFromConfig(awsCfg),
		IAM:      iam.NewFromConfig(awsCfg),
		SSM:      ssm.NewFromConfig(awsCfg),
		SFN:      sfn.NewFromConfig(awsCfg),
	}, log, time.Now)
	if err != nil {
		return nil, err
	}
	return handler.New(d, log).Handle, nil
}
