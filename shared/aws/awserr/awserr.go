// Package awserr classifies errors returned by aws-sdk-go-v2 clients into the
// few classes the provisioning and termination code reacts to: not found,
// throttled, unfulfillable capacity, unauthorized and already exists. It
// looks only at the API error code (smithy.APIError), so it works the same
// for EC2 (Query protocol), SSM, DynamoDB, SQS and Step Functions (JSON
// protocols), wrapped or not.
//
// Fleet errors from CreateFleet are not Go errors but (code, message)
// pairs in CreateFleetOutput.Errors; ClassifyCode classifies those.
package awserr

import (
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// Class is the kind of failure an API error code denotes.
type Class int

const (
	// Unknown is any error that is not an API error or whose code is in no
	// other class (including nil).
	Unknown Class = iota
	// NotFound means the named resource does not exist (or no longer does).
	// Deleting or terminating it again can be treated as done.
	NotFound
	// Throttled means the request was rate-limited; retry later with backoff.
	Throttled
	// Unfulfillable means EC2 cannot provide the requested capacity for this
	// offering now. Karpenter marks the (capacity type, instance type, zone)
	// offering unavailable for 3 minutes (spec §4 step 9).
	Unfulfillable
	// Unauthorized means the caller's credentials are missing, invalid,
	// expired or lack the permission. Retrying does not help until IAM changes.
	Unauthorized
	// AlreadyExists means a resource with the requested unique name exists.
	AlreadyExists
)

// String returns the class name, e.g. "NotFound".
func (c Class) String() string {
	switch c {
	case NotFound:
		return "NotFound"
	case Throttled:
		return "Throttled"
	case Unfulfillable:
		return "Unfulfillable"
	case Unauthorized:
		return "Unauthorized"
	case AlreadyExists:
		return "AlreadyExists"
	}
	return "Unknown"
}

// API error codes this package names explicitly, for callers that must
// react to one code rather than its class (e.g. invalidating a launch
// template cache, or marking a subnet rather than an offering unavailable).
const (
	// CodeInsufficientInstanceCapacity is the CreateFleet per-override code
	// for an exhausted (instance type, zone, capacity type) pool.
	CodeInsufficientInstanceCapacity = "InsufficientInstanceCapacity"
	// CodeInsufficientFreeAddressesInSubnet: the subnet has no free IP
	// address; Karpenter marks the subnet (not the offering) unavailable.
	CodeInsufficientFreeAddressesInSubnet = "InsufficientFreeAddressesInSubnet"
	// CodeReservationCapacityExceeded: the capacity reservation is full.
	CodeReservationCapacityExceeded = "ReservationCapacityExceeded"
	// CodeServiceLinkedRoleCreationNotPermitted: the spot service-linked
	// role is missing and cannot be created; Karpenter marks capacity type
	// spot unavailable (spec §4 step 9).
	CodeServiceLinkedRoleCreationNotPermitted = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
	// CodeLaunchTemplateNameNotFound: a launch template named in the
	// request does not exist; Karpenter drops it from its cache and retries.
	CodeLaunchTemplateNameNotFound = "InvalidLaunchTemplateName.NotFoundException"
	// CodeLaunchTemplateNameAlreadyExists: CreateLaunchTemplate with a name
	// that is taken.
	CodeLaunchTemplateNameAlreadyExists = "InvalidLaunchTemplateName.AlreadyExistsException"
	// CodeRequestLimitExceeded is EC2's throttling code.
	CodeRequestLimitExceeded = "RequestLimitExceeded"
)

// unfulfillableCodes are the CreateFleet error codes Karpenter treats as
// "unfulfillable capacity" (aws: pkg/errors/errors.go
// unfulfillableCapacityErrorCodes; spec §4 step 9).
var unfulfillableCodes = map[string]bool{
	CodeInsufficientInstanceCapacity:      true,
	"MaxSpotInstanceCountExceeded":        true,
	"VcpuLimitExceeded":                   true,
	"UnfulfillableCapacity":               true,
	"Unsupported":                         true,
	CodeInsufficientFreeAddressesInSubnet: true,
	"MaxFleetCountExceeded":               true,
	CodeReservationCapacityExceeded:       true,
}

// notFoundCodes cover the resources the project reads or deletes: EC2
// instances, launch templates, AMIs, subnets, security groups, fleets,
// capacity reservations (EC2 API reference, "Error codes"), SSM parameters,
// DynamoDB tables, SQS queues, Step Functions executions and IAM entities.
// Karpenter's own list (aws: pkg/errors/errors.go notFoundErrorCodes) is a
// subset.
var notFoundCodes = map[string]bool{
	"InvalidInstanceID.NotFound":                 true,
	CodeLaunchTemplateNameNotFound:               true,
	"InvalidLaunchTemplateId.NotFound":           true,
	"InvalidLaunchTemplateId.VersionNotFound":    true,
	"InvalidAMIID.NotFound":                      true,
	"InvalidSubnetID.NotFound":                   true,
	"InvalidGroup.NotFound":                      true,
	"InvalidSecurityGroupID.NotFound":            true,
	"InvalidFleetId.NotFound":                    true,
	"InvalidCapacityReservationId.NotFound":      true,
	"InvalidVolume.NotFound":                     true,
	"ParameterNotFound":                          true,
	"ParameterVersionNotFound":                   true,
	"ResourceNotFoundException":                  true,
	"AWS.SimpleQueueService.NonExistentQueue":    true,
	"QueueDoesNotExist":                          true,
	"ExecutionDoesNotExist":                      true,
	"StateMachineDoesNotExist":                   true,
	"NoSuchEntity":                               true,
	"InvalidInstanceProfile.NotFound":            true,
	"InvalidLaunchTemplateName.NotFound":         true,
	"InvalidSpotInstanceRequestID.NotFound":      true,
	"InvalidCapacityReservationFleetId.NotFound": true,
}

// throttledCodes are aws-sdk-go-v2's throttle codes (aws/retry/standard.go
// DefaultThrottleErrorCodes, v1.48.0).
var throttledCodes = map[string]bool{
	"Throttling":                             true,
	"ThrottlingException":                    true,
	"ThrottledException":                     true,
	"RequestThrottledException":              true,
	"TooManyRequestsException":               true,
	"ProvisionedThroughputExceededException": true,
	"TransactionInProgressException":         true,
	CodeRequestLimitExceeded:                 true,
	"BandwidthLimitExceeded":                 true,
	"LimitExceededException":                 true,
	"RequestThrottled":                       true,
	"SlowDown":                               true,
	"PriorRequestNotComplete":                true,
	"EC2ThrottledException":                  true,
}

// unauthorizedCodes are the credential and permission failures of EC2
// (UnauthorizedOperation, AuthFailure, Blocked, OptInRequired) and of the
// JSON-protocol services (AccessDenied*, UnrecognizedClient, expired or
// invalid tokens, bad signatures). Every "AuthFailure.*" code is
// unauthorized too, including ServiceLinkedRoleCreationNotPermitted: a
// caller that treats that one as "spot unavailable", as Karpenter does,
// compares the code with CodeServiceLinkedRoleCreationNotPermitted.
var unauthorizedCodes = map[string]bool{
	"UnauthorizedOperation":               true,
	"AuthFailure":                         true,
	"Blocked":                             true,
	"OptInRequired":                       true,
	"AccessDenied":                        true,
	"AccessDeniedException":               true,
	"UnrecognizedClientException":         true,
	"InvalidClientTokenId":                true,
	"ExpiredToken":                        true,
	"ExpiredTokenException":               true,
	"SignatureDoesNotMatch":               true,
	"InvalidSignatureException":           true,
	"IncompleteSignature":                 true,
	"MissingAuthenticationToken":          true,
	"MissingAuthenticationTokenException": true,
}

// alreadyExistsCodes: unique-name collisions on create.
var alreadyExistsCodes = map[string]bool{
	CodeLaunchTemplateNameAlreadyExists: true,
	"InvalidGroup.Duplicate":            true,
	"ResourceInUseException":            true,
	"ExecutionAlreadyExists":            true,
	"QueueAlreadyExists":                true,
	"EntityAlreadyExists":               true,
}

// ClassifyCode returns the class of an API error code, as found in
// smithy.APIError.ErrorCode or in a CreateFleet error's ErrorCode. Codes
// are compared exactly (AWS codes are case-sensitive).
func ClassifyCode(code string) Class {
	switch {
	case code == "":
		return Unknown
	case unfulfillableCodes[code]:
		return Unfulfillable
	case notFoundCodes[code]:
		return NotFound
	case throttledCodes[code]:
		return Throttled
	case unauthorizedCodes[code], strings.HasPrefix(code, "AuthFailure."):
		return Unauthorized
	case alreadyExistsCodes[code]:
		return AlreadyExists
	}
	return Unknown
}

// Classify returns the class of err's API error code. It unwraps err
// (operation errors, retry "max attempts" errors and fmt.Errorf %w chains)
// to the first smithy.APIError; an error without one, and nil, are Unknown.
func Classify(err error) Class {
	return ClassifyCode(Code(err))
}

// Code returns the API error code carried by err (the first smithy.APIError
// in its chain), or "" when there is none.
func Code(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}
