// Package ekstoken makes the bearer tokens with which an IAM principal (a
// Lambda's execution role) authenticates to an EKS cluster's API server.
//
// # How an EKS IAM token works
//
// The caller proves who it is without sending its credentials: it signs,
// with SigV4 in query-string form, an STS GetCallerIdentity request that it
// never sends. The signature also covers a header x-k8s-aws-id whose value
// is the cluster name, which binds the token to one cluster. The token is
// the text "k8s-aws-v1." followed by the signed URL in unpadded, URL-safe
// base64. The EKS authenticator decodes it, checks that it is a
// GetCallerIdentity URL for an STS host and that x-k8s-aws-id is among the
// signed headers, replays the request to STS with the header set to its own
// cluster name, and maps the identity STS returns to a Kubernetes user
// through the cluster's access entries. The authenticator accepts a token
// for 15 minutes after its X-Amz-Date; it is the scheme that
// aws-iam-authenticator and `aws eks get-token` implement, and this package
// reports a lifetime of 14 minutes to stay clear of the limit and of clock
// skew, as they do. The URL's own X-Amz-Expires is 60 seconds, the value
// those clients sign; the authenticator applies its own 15-minute window.
//
// A token is only as good as the credentials that signed it: session
// credentials that expire sooner end the token sooner.
//
// The package imports only the AWS SDK (STS and its SigV4 presigner).
package ekstoken

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Token format and timing (aws-iam-authenticator pkg/token; EKS user guide,
// "Grant IAM users access to Kubernetes with EKS access entries").
const (
	// Prefix starts every token; the rest is base64.RawURLEncoding of the
	// presigned URL.
	Prefix = "k8s-aws-v1."
	// ClusterIDHeader is the signed header that names the cluster.
	ClusterIDHeader = "x-k8s-aws-id"
	// Lifetime is the validity Token reports: EKS accepts a token for 15
	// minutes after signing, one minute is kept as margin.
	Lifetime = 14 * time.Minute
	// RefreshBefore is how long before the reported expiry Token stops
	// reusing a token and signs a new one.
	RefreshBefore = time.Minute
	// presignExpiresSeconds is the X-Amz-Expires query value signed into
	// the URL.
	presignExpiresSeconds = "60"
)

// Presigner presigns an STS GetCallerIdentity request; *sts.PresignClient
// implements it (sts.NewPresignClient(sts.NewFromConfig(cfg))).
type Presigner interface {
	PresignGetCallerIdentity(ctx context.Context, params *sts.GetCallerIdentityInput, optFns ...func(*sts.PresignOptions)) (*v4.PresignedHTTPRequest, error)
}

var _ Presigner = (*sts.PresignClient)(nil)

var errNoCluster = errors.New("cluster name is empty")

// Source makes EKS IAM tokens for one cluster and reuses each until
// RefreshBefore ahead of its expiry. It is safe for concurrent use; a
// token being signed is shared by the callers waiting for it. The reuse is
// a credential cache of the kind the SDK keeps for its own credentials: it
// holds nothing another process needs and nothing that must be consistent
// across invocations.
type Source struct {
	presigner Presigner
	cluster   string
	now       func() time.Time

	mu     sync.Mutex
	token  string
	expiry time.Time
}

// Option configures a Source.
type Option func(*Source)

// WithClock makes the Source read the time from now instead of time.Now;
// for tests.
func WithClock(now func() time.Time) Option {
	return func(s *Source) { s.now = now }
}

// New returns a Source that presigns with presigner for the cluster named
// clusterName (the EKS cluster name, not its ARN). It makes no request;
// a missing presigner or cluster name surfaces as an error from Token.
func New(presigner Presigner, clusterName string, opts ...Option) *Source {
	s := &Source{presigner: presigner, cluster: clusterName, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Token returns a bearer token for the cluster and the time until which it
// may be used (signing time plus Lifetime). It returns the previous token
// while that is more than RefreshBefore from expiry, and otherwise presigns
// a new one; presigning is local (no request to STS) but may fetch
// credentials. Errors: no cluster name or presigner, the presigner's
// error (wrapped), or a presigned request that does not sign the
// x-k8s-aws-id header with the cluster name.
func (s *Source) Token(ctx context.Context) (string, time.Time, error) {
	if s.cluster == "" {
		return "", time.Time{}, fmt.Errorf("eks token: %w", errNoCluster)
	}
	if s.presigner == nil {
		return "", time.Time{}, errors.New("eks token: nil presigner")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	signedAt := s.now()
	if s.token != "" && signedAt.Before(s.expiry.Add(-RefreshBefore)) {
		return s.token, s.expiry, nil
	}
	req, err := s.presigner.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(o *sts.PresignOptions) {
		o.ClientOptions = append(o.ClientOptions, func(o *sts.Options) {
			o.APIOptions = append(o.APIOptions,
				smithyhttp.AddHeaderValue(ClusterIDHeader, s.cluster),
				smithyhttp.AddHeaderValue("X-Amz-Expires", presignExpiresSeconds),
			)
		})
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("eks token: presign GetCallerIdentity: %w", err)
	}
	if req == nil || req.URL == "" {
		return "", time.Time{}, errors.New("eks token: presigner returned no URL")
	}
	if got := req.SignedHeader.Get(ClusterIDHeader); got != s.cluster {
		return "", time.Time{}, fmt.Errorf("eks token: presigned request signs %s %q, want %q", http.CanonicalHeaderKey(ClusterIDHeader), got, s.cluster)
	}
	s.token = Prefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL))
	s.expiry = signedAt.Add(Lifetime)
	return s.token, s.expiry, nil
}

// BearerToken is Token without the expiry, in the shape
// kube.RESTConfig takes: kube.RESTConfig(endpoint, ca, src.BearerToken).
func (s *Source) BearerToken(ctx context.Context) (string, error) {
	tok, _, err := s.Token(ctx)
	return tok, err
}
