// Command interruption is the Lambda behind the interruption queue: it turns
// EventBridge's EC2 Spot interruption warnings, rebalance recommendations,
// instance state changes, AWS Health scheduled changes and
// capacity-reservation interruption warnings into interruption executions
// (Step Functions) and event records, as Karpenter's interruption controller
// does (see package handler).
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	"github.com/nodewright/nodewright/functions/interruption/handler"
)

func main() { lambdakit.Main(wire) }

// wire builds the handler from the environment (handler.LoadConfig) and
// the AWS configuration.
func wire(_ context.Context, awsCfg aws.Config) (any, error) {
	cfg, err := handler.LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	h, err := handler.New(cfg, handler.Clients{DynamoDB: dynamodb.NewFromConfig(awsCfg), SFN: sfn.NewFromConfig(awsCfg), Metrics: os.Stdout},
		lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "interruption"), time.Now)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}
