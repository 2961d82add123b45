// Command disruption is the scheduled disruption Lambda: it evaluates
// emptiness, drift, expiration and consolidation and starts one disruption
// execution per command (see package handler).
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
	"github.com/nodewright/nodewright/functions/internal/clusterclient"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
)

func main() { lambdakit.Main(wire) }

// wire builds the handler from the environment (decider.LoadConfig) and
// the AWS configuration.
func wire(_ context.Context, awsCfg aws.Config) (any, error) {
	cfg, err := decider.LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	clients := decider.Clients{
		Metrics:  os.Stdout,
		DynamoDB: dynamodb.NewFromConfig(awsCfg),
		EC2:      ec2.NewFromConfig(awsCfg),
		IAM:      iam.NewFromConfig(awsCfg),
		SSM:      ssm.NewFromConfig(awsCfg),
		SFN:      sfn.NewFromConfig(awsCfg),
	}
	if cfg.Endpoint != "" {
		k, err := clusterclient.New(awsCfg, cfg.Cluster, cfg.Endpoint, cfg.CAData)
		if err != nil {
			return nil, err
		}
		clients.Kube = k
	}
	h, err := decider.New(cfg, clients, lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "disruption"), time.Now)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}
