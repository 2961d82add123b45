// Package clusterclient builds the Kubernetes client with which a Lambda
// reaches its EKS cluster: the API server's endpoint and CA from the
// function's configuration, and a bearer token presigned with the Lambda's
// own IAM credentials (shared/aws/ekstoken), which the cluster maps to a
// Kubernetes identity through its EKS access entry for the function's role.
package clusterclient

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/nodewright/nodewright/shared/aws/ekstoken"
	"github.com/nodewright/nodewright/shared/kube"
)

// New returns a client for cluster's API server at endpoint (https) whose
// serving certificate chains to caPEM, authenticating with EKS IAM tokens
// signed through STS with awsCfg's credentials.
func New(awsCfg aws.Config, cluster, endpoint string, caPEM []byte) (*kube.Client, error) {
	if cluster == "" || endpoint == "" || len(caPEM) == 0 {
		return nil, errors.New("kubernetes client: cluster, endpoint and CA are required")
	}
	tokens := ekstoken.New(sts.NewPresignClient(sts.NewFromConfig(awsCfg)), cluster)
	c, err := kube.New(kube.RESTConfig(endpoint, caPEM, tokens.BearerToken))
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}
