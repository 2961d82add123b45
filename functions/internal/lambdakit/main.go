package lambdakit

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/nodewright/nodewright/internal/logfield"
)

// Main is the main function of every nodewright Lambda: it loads the AWS
// configuration (AWSConfig with no overrides), calls wire to build the
// function's handler from it and the environment, and hands the handler
// to the Lambda runtime (lambda.Start; the handler has one of the shapes
// lambda.Start accepts), through WithFailureLine, so that every failed
// invocation writes the InvocationFailed line. A wiring error (a missing or malformed variable,
// an unusable CA bundle) is logged as "init" and exits 1, so the init
// phase fails visibly in CloudWatch instead of every invocation. The
// first line of the process is logfield.Start's (version, commit, and the
// function's name from AWS_LAMBDA_FUNCTION_NAME).
func Main(wire func(ctx context.Context, awsCfg aws.Config) (handler any, err error)) {
	ctx := context.Background()
	log := NewLogger(os.Stdout, slog.LevelInfo)
	logfield.Start(log, logfield.Function, os.Getenv("AWS_LAMBDA_FUNCTION_NAME"))
	awsCfg, err := AWSConfig(ctx, AWSOptions{})
	if err == nil {
		var h any
		if h, err = wire(ctx, awsCfg); err == nil {
			lambda.Start(WithFailureLine(h, log))
			return
		}
	}
	log.Error("init", logfield.Error, err)
	os.Exit(1)
}
