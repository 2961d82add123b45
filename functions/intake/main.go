// Command intake is the intake Lambda behind API Gateway: it validates,
// dedupes and enqueues the forwarder's messages (see package handler).
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/functions/intake/handler"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/queue"
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
	store, err := ddbstore.New(dynamodb.NewFromConfig(awsCfg), cfg.Table, cfg.Cluster)
	if err != nil {
		return err
	}
	q, err := queue.New(sqs.NewFromConfig(awsCfg), cfg.QueueURL)
	if err != nil {
		return err
	}
	h, err := handler.New(cfg, handler.Deps{
		Store: store,
		Queue: q,
		Log:   lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "intake"),
		Now:   time.Now,
	})
	if err != nil {
		return err
	}
	lambda.Start(h.Handle)
	return nil
}
