// Command gc is the scheduled garbage-collection Lambda (see package
// handler).
package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/nodewright/nodewright/functions/gc/handler"
	"github.com/nodewright/nodewright/functions/internal/clusterclient"
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
	ca, err := base64.StdEncoding.DecodeString(cfg.CAData)
	if err != nil {
		return fmt.Errorf("CLUSTER_CA_DATA: %w", err)
	}
	nodes, err := clusterclient.New(awsCfg, cfg.Cluster, cfg.Endpoint, ca)
	if err != nil {
		return err
	}
	h, err := handler.New(cfg, handler.Clients{
		DynamoDB: dynamodb.NewFromConfig(awsCfg),
		EC2:      ec2.NewFromConfig(awsCfg),
		Nodes:    nodes,
	}, lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "gc"), time.Now)
	if err != nil {
		return err
	}
	lambda.Start(h.Handle)
	return nil
}
