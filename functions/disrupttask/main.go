// Command disrupttask is the Lambda behind every task state of the
// disruption and interruption state machines (see package handler).
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

	"github.com/nodewright/nodewright/functions/disrupttask/handler"
	"github.com/nodewright/nodewright/functions/internal/clusterclient"
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
	k, err := clusterclient.New(awsCfg, cfg.Cluster, cfg.Endpoint, cfg.CAData)
	if err != nil {
		return nil, err
	}
	h, err := handler.New(cfg, handler.Clients{
		Metrics:  os.Stdout,
		DynamoDB: dynamodb.NewFromConfig(awsCfg),
		EC2:      ec2.NewFromConfig(awsCfg),
		IAM:      iam.NewFromConfig(awsCfg),
		SSM:      ssm.NewFromConfig(awsCfg),
		SFN:      sfn.NewFromConfig(awsCfg),
		Kube:     k,
	}, lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "disrupttask"), time.Now)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}
