package lambdakit

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
)

// AWSOptions shape the aws.Config of AWSConfig. The zero value is the SDK's
// default chain with nothing overridden.
type AWSOptions struct {
	// Region overrides AWS_REGION (which Lambda sets) when not empty.
	Region string
	// Endpoints maps an SDK service ID ("DynamoDB", "SQS", "EC2", "SSM",
	// "STS") to the base URL every client of that service built from the
	// config uses, for the local stack and in-process tests. They take
	// precedence over the AWS_ENDPOINT_URL_<SERVICE> variables.
	Endpoints map[string]string
	// Credentials replaces the default credential chain when not nil
	// (static credentials for the local stack).
	Credentials aws.CredentialsProvider
	// HTTPClient replaces the SDK's HTTP client when not nil.
	HTTPClient aws.HTTPClient
}

// AWSConfig loads the SDK's default configuration: region, credentials
// (the Lambda execution role's, from the environment), retries, and the
// endpoint variables AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> (for
// example AWS_ENDPOINT_URL_DYNAMODB), which every aws-sdk-go-v2 client
// honours on its own. The local stack points the unmodified functions at
// its stand-ins (kumo for DynamoDB and SQS, local/ec2sim for EC2 and SSM)
// through exactly those variables; opts.Endpoints does the same without
// the environment. One caveat of the SDK: when AWS_ENDPOINT_URL is set and
// a service's own variable is not, that service ignores opts.Endpoints.
func AWSConfig(ctx context.Context, opts AWSOptions) (aws.Config, error) {
	var loaders []func(*config.LoadOptions) error
	if opts.Region != "" {
		loaders = append(loaders, config.WithRegion(opts.Region))
	}
	if opts.Credentials != nil {
		loaders = append(loaders, config.WithCredentialsProvider(opts.Credentials))
	}
	if opts.HTTPClient != nil {
		loaders = append(loaders, config.WithHTTPClient(opts.HTTPClient))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	if len(opts.Endpoints) > 0 {
		// Clients ask each config source, in order, for their service's
		// base endpoint; the first answer wins.
		cfg.ConfigSources = slices.Insert(cfg.ConfigSources, 0, any(serviceEndpoints(opts.Endpoints)))
	}
	return cfg, nil
}

// serviceEndpoints answers the SDK's per-service base-endpoint lookup
// (the method every client calls on its config sources).
type serviceEndpoints map[string]string

// GetServiceBaseEndpoint returns the endpoint of the service sdkID, if set.
func (m serviceEndpoints) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	v, ok := m[sdkID]
	return v, ok && v != "", nil
}
