// Command disruption is the scheduled disruption Lambda: it evaluates
// emptiness, drift, expiration and consolidation and starts one disruption
// execution per command (see package handler).
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
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodewright/nodewright/functions/disruption/handler"
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
	clients := handler.Clients{
		DynamoDB: dynamodb.NewFromConfig(awsCfg),
		EC2:      ec2.NewFromConfig(awsCfg),
		SSM:      ssm.NewFromConfig(awsCfg),
		SFN:      sfn.NewFromConfig(awsCfg),
	}
	if cfg.Endpoint != "" {
		ca, err := base64.StdEncoding.DecodeString(cfg.CAData)
		if err != nil {
			return fmt.Errorf("CLUSTER_CA_DATA: %w", err)
		}
		k, err := clusterclient.New(awsCfg, cfg.Cluster, cfg.Endpoint, ca)
		if err != nil {
			return err
		}
		clients.Kube = k
	}
	h, err := handler.New(cfg, clients, lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "disruption"), time.Now)
	if err != nil {
		return err
	}
	lambda.Start(h.Handle)
	return nil
}
