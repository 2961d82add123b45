package awserr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/nodewright/nodewright/shared/aws/awserr"
)

// typedError mimics a modeled SDK error type (e.g. ssm types.ParameterNotFound):
// it implements smithy.APIError with a fixed code.
type typedError struct{ code string }

func (e *typedError) Error() string                 { return e.code + ": modeled error" }
func (e *typedError) ErrorCode() string             { return e.code }
func (e *typedError) ErrorMessage() string          { return "modeled error" }
func (e *typedError) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }

func apiErr(code string) error {
	return &smithy.GenericAPIError{Code: code, Message: "message for " + code}
}

// sdkWrapped wraps err the way an SDK client returns it: an OperationError
// around the API error, then a caller's fmt.Errorf.
func sdkWrapped(err error) error {
	return fmt.Errorf("launch nodeclaim default-abc12: %w",
		&smithy.OperationError{ServiceID: "EC2", OperationName: "CreateFleet", Err: err})
}

func TestClassifyCode(t *testing.T) {
	tests := []struct {
		name string
		code string
		want awserr.Class
	}{
		// Spec §4 step 9: the eight unfulfillable fleet error codes.
		{name: "insufficient instance capacity is unfulfillable", code: "InsufficientInstanceCapacity", want: awserr.Unfulfillable},
		{name: "max spot instance count exceeded is unfulfillable", code: "MaxSpotInstanceCountExceeded", want: awserr.Unfulfillable},
		{name: "vcpu limit exceeded is unfulfillable", code: "VcpuLimitExceeded", want: awserr.Unfulfillable},
		{name: "unfulfillable capacity is unfulfillable", code: "UnfulfillableCapacity", want: awserr.Unfulfillable},
		{name: "unsupported is unfulfillable", code: "Unsupported", want: awserr.Unfulfillable},
		{name: "insufficient free addresses in subnet is unfulfillable", code: "InsufficientFreeAddressesInSubnet", want: awserr.Unfulfillable},
		{name: "max fleet count exceeded is unfulfillable", code: "MaxFleetCountExceeded", want: awserr.Unfulfillable},
		{name: "reservation capacity exceeded is unfulfillable", code: "ReservationCapacityExceeded", want: awserr.Unfulfillable},

		{name: "unknown instance id is not found", code: "InvalidInstanceID.NotFound", want: awserr.NotFound},
		{name: "unknown launch template name is not found", code: "InvalidLaunchTemplateName.NotFoundException", want: awserr.NotFound},
		{name: "unknown launch template id is not found", code: "InvalidLaunchTemplateId.NotFound", want: awserr.NotFound},
		{name: "unknown AMI is not found", code: "InvalidAMIID.NotFound", want: awserr.NotFound},
		{name: "unknown subnet is not found", code: "InvalidSubnetID.NotFound", want: awserr.NotFound},
		{name: "unknown security group is not found", code: "InvalidGroup.NotFound", want: awserr.NotFound},
		{name: "missing SSM parameter is not found", code: "ParameterNotFound", want: awserr.NotFound},
		{name: "missing DynamoDB table is not found", code: "ResourceNotFoundException", want: awserr.NotFound},
		{name: "missing SQS queue is not found", code: "AWS.SimpleQueueService.NonExistentQueue", want: awserr.NotFound},
		{name: "missing IAM entity is not found", code: "NoSuchEntity", want: awserr.NotFound},

		{name: "EC2 request limit exceeded is throttled", code: "RequestLimitExceeded", want: awserr.Throttled},
		{name: "JSON-protocol throttling exception is throttled", code: "ThrottlingException", want: awserr.Throttled},
		{name: "DynamoDB provisioned throughput exceeded is throttled", code: "ProvisionedThroughputExceededException", want: awserr.Throttled},
		{name: "too many requests is throttled", code: "TooManyRequestsException", want: awserr.Throttled},

		{name: "unauthorized operation is unauthorized", code: "UnauthorizedOperation", want: awserr.Unauthorized},
		{name: "auth failure is unauthorized", code: "AuthFailure", want: awserr.Unauthorized},
		{name: "any AuthFailure sub-code is unauthorized", code: "AuthFailure.ServiceLinkedRoleCreationNotPermitted", want: awserr.Unauthorized},
		{name: "access denied exception is unauthorized", code: "AccessDeniedException", want: awserr.Unauthorized},
		{name: "expired token is unauthorized", code: "ExpiredTokenException", want: awserr.Unauthorized},
		{name: "unrecognized client is unauthorized", code: "UnrecognizedClientException", want: awserr.Unauthorized},

		{name: "launch template name taken already exists", code: "InvalidLaunchTemplateName.AlreadyExistsException", want: awserr.AlreadyExists},

		{name: "empty code is unknown", code: "", want: awserr.Unknown},
		{name: "validation error is unknown", code: "InvalidParameterValue", want: awserr.Unknown},
		{name: "internal error is unknown", code: "InternalError", want: awserr.Unknown},
		{name: "conditional check failure is unknown", code: "ConditionalCheckFailedException", want: awserr.Unknown},
		{name: "codes are case-sensitive", code: "insufficientinstancecapacity", want: awserr.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := awserr.ClassifyCode(tt.code); got != tt.want {
				t.Errorf("ClassifyCode(%q) = %v, want %v", tt.code, got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		want     awserr.Class
		wantCode string
	}{
		{name: "bare generic API error", err: apiErr("InvalidInstanceID.NotFound"), want: awserr.NotFound, wantCode: "InvalidInstanceID.NotFound"},
		{name: "API error inside an operation error and a caller's wrap", err: sdkWrapped(apiErr("RequestLimitExceeded")), want: awserr.Throttled, wantCode: "RequestLimitExceeded"},
		{name: "modeled error type", err: sdkWrapped(&typedError{code: "ParameterNotFound"}), want: awserr.NotFound, wantCode: "ParameterNotFound"},
		{name: "joined errors use the first API error", err: errors.Join(errors.New("first"), apiErr("UnauthorizedOperation")), want: awserr.Unauthorized, wantCode: "UnauthorizedOperation"},
		{name: "nil error", err: nil, want: awserr.Unknown, wantCode: ""},
		{name: "plain error", err: errors.New("connection refused"), want: awserr.Unknown, wantCode: ""},
		{name: "context deadline is not an API error", err: sdkWrapped(context.DeadlineExceeded), want: awserr.Unknown, wantCode: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := awserr.Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if got := awserr.Code(tt.err); got != tt.wantCode {
				t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.wantCode)
			}
		})
	}
}

func TestClassString(t *testing.T) {
	tests := []struct {
		class awserr.Class
		want  string
	}{
		{awserr.Unknown, "Unknown"},
		{awserr.NotFound, "NotFound"},
		{awserr.Throttled, "Throttled"},
		{awserr.Unfulfillable, "Unfulfillable"},
		{awserr.Unauthorized, "Unauthorized"},
		{awserr.AlreadyExists, "AlreadyExists"},
		{awserr.Class(99), "Unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.class.String(); got != tt.want {
				t.Errorf("Class(%d).String() = %q, want %q", int(tt.class), got, tt.want)
			}
		})
	}
}
