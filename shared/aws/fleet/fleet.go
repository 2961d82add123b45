// Package fleet launches, lists and terminates the EC2 instances behind
// NodeClaims. Launch turns one NodeClaim into one instant CreateFleet call
// exactly as Karpenter's AWS provider shapes it (aws:
// pkg/providers/instance/instance.go, instance/filter/filter.go; karpenter-spec
// §4 steps 2-9), with one addition: a ClientToken derived from the NodeClaim, so
// a retried invocation never launches twice, and (Request.Requests) the
// request first sent under it replayed by every retry, since EC2 refuses a
// token reused with other parameters (IdempotentParameterMismatch). Per-override capacity errors are
// folded into unavailable offerings for the caller to record.
//
// The package declares the narrow EC2API it calls; *ec2.Client satisfies it.
// Launch templates come from the caller through TemplateSource
// (shared/aws/nodeclass builds them).
package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/launch"
)

// EC2API is the subset of the EC2 client this package calls.
type EC2API interface {
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

var _ EC2API = (*ec2.Client)(nil)

// Client launches and manages instances through an EC2API. It holds no state
// between calls and is safe for concurrent use.
type Client struct {
	api EC2API
}

// New returns a Client calling api.
func New(api EC2API) *Client { return &Client{api: api} }

// TemplateRequest asks for the launch templates of one launch.
type TemplateRequest struct {
	// CapacityType is the launch's capacity type ("spot", "on-demand" or
	// "reserved"); it is a node label in the user data.
	CapacityType string
	// ReservationID is the capacity reservation the templates must target
	// (reserved launches only).
	ReservationID string
	// ReservationType is that reservation's type (v1.ReservationTypeDefault
	// or v1.ReservationTypeCapacityBlock) and ReservationInterruptible
	// whether it is an interruptible reservation: they set the templates'
	// market type (reserved launches only).
	ReservationType          string
	ReservationInterruptible bool
	// InstanceTypes are the types the launch will request, cheapest first.
	InstanceTypes []*catalog.InstanceType
	// Tenancy is the launch's tenancy (launch.Tenancy of the claim's
	// requirements): "default" or "dedicated", the templates' placement.
	Tenancy string
}

// TemplateSource supplies launch templates. It returns the templates that
// serve the requested instance types (types with no template, e.g. no
// compatible AMI, are left out of the launch).
type TemplateSource interface {
	LaunchTemplates(ctx context.Context, req TemplateRequest) ([]launch.Template, error)
}

// TemplateFunc adapts a function to TemplateSource.
type TemplateFunc func(ctx context.Context, req TemplateRequest) ([]launch.Template, error)

// LaunchTemplates calls f.
func (f TemplateFunc) LaunchTemplates(ctx context.Context, req TemplateRequest) ([]launch.Template, error) {
	return f(ctx, req)
}

// Request is one NodeClaim to launch.
type Request struct {
	// ClusterName names the cluster in the launch tags.
	ClusterName string
	// NodeClaim is the claim to launch. Its UID (or, without one, its
	// name) derives the ClientToken; its requirements, resource requests,
	// karpenter.sh/nodepool label and min-values-relaxed annotation shape
	// the request.
	NodeClaim *v1.NodeClaim
	// NodeClass is the claim's EC2NodeClass: its name, spec.tags and
	// spec.context are used.
	NodeClass *v1.EC2NodeClass
	// InstanceTypes are the node class's instance types with their
	// offerings (unavailable offerings marked), as catalog.Resolve returns
	// them.
	InstanceTypes []*catalog.InstanceType
	// Subnets are the node class's resolved subnets.
	Subnets []launch.Subnet
	// Templates supplies the launch templates.
	Templates TemplateSource
	// Requests, when set, keeps the CreateFleet request sent under each
	// ClientToken, so that a retry (a redelivered message, a Lambda killed
	// after EC2 launched) sends that same request again and gets EC2's
	// first answer back, however the unavailable offerings, subnets or
	// templates changed since. Without it a retry rebuilds the request,
	// and EC2 answers a token reused with other parameters with
	// IdempotentParameterMismatch.
	Requests RequestLog
}

// RequestLog stores CreateFleet requests by ClientToken (ddbstore payloads
// in the Lambdas). The first request stored under a token is kept.
type RequestLog interface {
	// RecordRequest stores body under token unless a body is stored there
	// already, and returns the stored body: body itself when this call
	// stored it, else the earlier one, byte for byte.
	RecordRequest(ctx context.Context, token string, body []byte) ([]byte, error)
}

// ClientToken returns the CreateFleet ClientToken of a NodeClaim:
// "nodewright-" and 40 hex digits of SHA-256 over its UID (its name when
// the UID is empty); 51 ASCII characters, under EC2's 64. The same claim
// always gets the same token, so EC2 returns the first call's fleet to a
// retry instead of launching again (EC2 API reference, "Ensuring
// idempotency"). Karpenter sets no token (karpenter-spec §4 step 7).
func ClientToken(claim *v1.NodeClaim) string {
	key := "uid/" + string(claim.UID)
	if claim.UID == "" {
		key = "name/" + claim.Name
	}
	sum := sha256.Sum256([]byte("nodewright/nodeclaim/" + key))
	return "nodewright-" + hex.EncodeToString(sum[:20])
}

// RetryClientToken is the ClientToken of the one CreateFleet retry after a
// launch template vanished: ClientToken(claim) and "-r" (53 characters).
func RetryClientToken(claim *v1.NodeClaim) string { return ClientToken(claim) + "-r" }

// Error is one per-override error of a CreateFleet response. It
// implements smithy.APIError, so awserr.Classify and awserr.Code work on the
// errors Launch returns.
type Error struct {
	Code         string
	Message      string
	InstanceType string
	Zone         string
	SubnetID     string
	CapacityType string
}

// Error names the code, the offering and the message.
func (e *Error) Error() string {
	return fmt.Sprintf("%s (%s %s %s): %s", e.Code, e.CapacityType, e.InstanceType, e.Zone, e.Message)
}

// ErrorCode is the EC2 error code.
func (e *Error) ErrorCode() string { return e.Code }

// ErrorMessage is the EC2 error message.
func (e *Error) ErrorMessage() string { return e.Message }

// ErrorFault is unknown for fleet errors.
func (e *Error) ErrorFault() smithy.ErrorFault { return smithy.FaultUnknown }
