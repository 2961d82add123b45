// Command interruption is the Lambda behind the interruption queue: it turns
// EventBridge's EC2 Spot interruption warnings, rebalance recommendations,
// instance state changes, AWS Health scheduled changes and
// capacity-reservation interruption warnings into interruption executions
// (Step Functions) and event records, as Karpenter's interruption controller
// does (see handler).
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
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/sfnstarter"
)

func main() {
	if err := run(context.Background()); err != nil {
		slog.Error("init", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := loadConfig(os.Getenv)
	if err != nil {
		return err
	}
	awsCfg, err := lambdakit.AWSConfig(ctx, lambdakit.AWSOptions{})
	if err != nil {
		return err
	}
	store, err := ddbstore.New(dynamodb.NewFromConfig(awsCfg), cfg.Table, cfg.Cluster)
	if err != nil {
		return err
	}
	starter, err := sfnstarter.New(sfn.NewFromConfig(awsCfg), cfg.StateMachineARN)
	if err != nil {
		return err
	}
	h := &handler{
		cfg:     cfg,
		store:   store,
		starter: starter,
		log:     lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "interruption"),
		now:     time.Now,
	}
	lambda.Start(h.Handle)
	return nil
}
