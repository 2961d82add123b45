// Command provisioner is the provisioning queue's consumer: it solves pod
// batches and launches their NodeClaims, and registers joining nodes (see
// package handler).
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodewright/nodewright/functions/internal/clusterclient"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	"github.com/nodewright/nodewright/functions/provisioner/handler"
)

func main() { lambdakit.Main(wire) }

// wire builds the handler from the environment (handler.LoadConfig) and
// the AWS configuration.
func wire(_ context.Context, awsCfg aws.Config) (any, error) {
	cfg, err := handler.LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	nodes, err := clusterclient.New(awsCfg, cfg.Cluster, cfg.Endpoint, cfg.CAData)
	if err != nil {
		return nil, err
	}
	h, err := handler.New(cfg, handler.Clients{
		Metrics:  os.Stdout,
		DynamoDB: dynamodb.NewFromConfig(awsCfg),
		EC2:      ec2.NewFromConfig(awsCfg),
		IAM:      iam.NewFromConfig(awsCfg),
		SSM:      ssm.NewFromConfig(awsCfg),
		Nodes:    nodes,
	}, lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "provisioner"), time.Now)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}
