// Command instancestatus is the scheduled instance-status Lambda: every
// minute it reads the cluster's instances with EC2 DescribeInstanceStatus
// and starts interruption executions for those with an impaired status
// check or a scheduled event, as Karpenter's instance-status controller
// does (see package handler).
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/nodewright/nodewright/functions/instancestatus/handler"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
)

func main() {
	if err := run(context.Background()); err != nil {
		slog.Error("init", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := handler.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	awsCfg, err := lambdakit.AWSConfig(ctx, lambdakit.AWSOptions{})
	if err != nil {
		return err
	}
	h, err := handler.New(cfg, handler.Clients{
		DynamoDB: dynamodb.NewFromConfig(awsCfg),
		EC2:      ec2.NewFromConfig(awsCfg),
		SFN:      sfn.NewFromConfig(awsCfg),
	}, lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "instancestatus"), time.Now)
	if err != nil {
		return err
	}
	lambda.Start(h.Handle)
	return nil
}
