// Package clusterclient builds the Kubernetes client with which a Lambda
// reaches its EKS cluster: the API server's endpoint and CA from the
// function's configuration, and a bearer token presigned with the Lambda's
// own IAM credentials (shared/aws/ekstoken), which the cluster maps to a
// Kubernetes identity through its EKS access entry for the function's role.
package clusterclient

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/nodewright/nodewright/shared/aws/ekstoken"
	"github.com/nodewright/nodewright/shared/kube"
)

// New returns a client for cluster's API server at endpoint (https) whose
// serving certificate chains to the CA bundle caData (base64 PEM, as EKS
// DescribeCluster's certificateAuthority.data and the functions'
// CLUSTER_CA_DATA carry it), authenticating with EKS IAM tokens signed
// through STS with awsCfg's credentials. The error names CLUSTER_CA_DATA
// when caData is not base64.
func New(awsCfg aws.Config, cluster, endpoint, caData string) (*kube.Client, error) {
	if cluster == "" || endpoint == "" || caData == "" {
		return nil, errors.New("kubernetes client: cluster, endpoint and CA are required")
	}
	caPEM, err := base64.StdEncoding.DecodeString(caData)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: CLUSTER_CA_DATA: %w", err)
	}
	tokens := ekstoken.New(sts.NewPresignClient(sts.NewFromConfig(awsCfg)), cluster)
	c, err := kube.New(kube.RESTConfig(endpoint, caPEM, tokens.BearerToken))
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}
