// Command gc is the scheduled garbage-collection Lambda (see package
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
	"github.com/aws/aws-sdk-go-v2/service/pricing"

	"github.com/nodewright/nodewright/functions/gc/handler"
	"github.com/nodewright/nodewright/functions/internal/clusterclient"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	"github.com/nodewright/nodewright/shared/aws/ec2data"
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
	clients := handler.Clients{
		Metrics:  os.Stdout,
		DynamoDB: dynamodb.NewFromConfig(awsCfg),
		EC2:      ec2.NewFromConfig(awsCfg),
		IAM:      iam.NewFromConfig(awsCfg),
		Nodes:    nodes,
	}
	if !cfg.IsolatedVPC {
		clients.Pricing = pricing.NewFromConfig(awsCfg, func(o *pricing.Options) { o.Region = ec2data.PricingRegion(cfg.Region) })
	}
	h, err := handler.New(cfg, clients, lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "gc"), time.Now)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}
