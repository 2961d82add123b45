// Command interruption is the Lambda behind the interruption queue: it turns
// EventBridge's EC2 Spot interruption warnings, rebalance recommendations,
// instance state changes, AWS Health scheduled changes and
// capacity-reservation interruption warnings into interruption executions
// (Step Functions) and event records, as Karpenter's interruption controller
// does (see package handler).
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	"github.com/nodewright/nodewright/functions/interruption/handler"
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
	h, err := handler.New(cfg, handler.Clients{DynamoDB: dynamodb.NewFromConfig(awsCfg), SFN: sfn.NewFromConfig(awsCfg)},
		lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "interruption"), time.Now)
	if err != nil {
		return err
	}
	lambda.Start(h.Handle)
	return nil
}
