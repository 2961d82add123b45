// Command instancestatus is the scheduled instance-status Lambda: every
// minute it reads the cluster's instances with EC2 DescribeInstanceStatus
// and starts interruption executions for those with an impaired status
// check or a scheduled event, as Karpenter's instance-status controller
// does (see package handler).
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/nodewright/nodewright/functions/instancestatus/handler"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
)

func main() { lambdakit.Main(wire) }

// wire builds the handler from the environment (handler.LoadConfig) and
// the AWS configuration.
func wire(_ context.Context, awsCfg aws.Config) (any, error) {
	cfg, err := handler.LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	h, err := handler.New(cfg, handler.Clients{
		DynamoDB: dynamodb.NewFromConfig(awsCfg),
		EC2:      ec2.NewFromConfig(awsCfg),
		SFN:      sfn.NewFromConfig(awsCfg),
	}, lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "instancestatus"), time.Now)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}
