// Command intake is the intake Lambda behind API Gateway: it validates,
// dedupes and enqueues the forwarder's messages (see package handler).
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/functions/intake/handler"
	"github.com/nodewright/nodewright/functions/internal/lambdakit"
	"github.com/nodewright/nodewright/shared/aws/ddbstore"
	"github.com/nodewright/nodewright/shared/aws/queue"
)

func main() { lambdakit.Main(wire) }

// wire builds the handler from the environment (handler.LoadConfig) and
// the AWS configuration.
func wire(_ context.Context, awsCfg aws.Config) (any, error) {
	cfg, err := handler.LoadConfig(os.Getenv)
	if err != nil {
		return nil, err
	}
	store, err := ddbstore.New(dynamodb.NewFromConfig(awsCfg), cfg.Table, cfg.Cluster)
	if err != nil {
		return nil, err
	}
	// A warm intake answers a sync poll whose NodeClaims changed since the
	// poller's copy, but not since its own last list, from memory.
	store = store.WithNodeClaimCache()
	q, err := queue.New(sqs.NewFromConfig(awsCfg), cfg.QueueURL)
	if err != nil {
		return nil, err
	}
	h, err := handler.New(cfg, handler.Deps{
		Store: store,
		Queue: q,
		Log:   lambdakit.NewLogger(os.Stdout, cfg.LogLevel).With("function", "intake"),
		Now:   time.Now,
	})
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}
