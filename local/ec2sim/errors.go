package ec2sim

import (
	"fmt"
	"net/http"
)

// apiError is an error the simulator returns to the client in the
// protocol's error envelope.
type apiError struct {
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalidParameterValue(format string, args ...any) *apiError {
	return errorf("InvalidParameterValue", format, args...)
}

func missingParameter(name string) *apiError {
	return errorf("MissingParameter", "The request must contain the parameter %s", name)
}

// httpStatus is the status EC2 and SSM send with an error code: 503 for
// throttling and unavailability, 500 for internal errors, 401 for bad
// credentials, 403 for missing permissions, 412 for a dry run that would
// have succeeded (DryRunOperation), 400 otherwise.
func httpStatus(code string) int {
	switch code {
	case "RequestLimitExceeded", "ServiceUnavailable", "Unavailable":
		return http.StatusServiceUnavailable
	case "InternalError", "InternalFailure", "InternalServerError":
		return http.StatusInternalServerError
	case "AuthFailure", "UnrecognizedClientException", "InvalidClientTokenId":
		return http.StatusUnauthorized
	case "UnauthorizedOperation", "AccessDeniedException", "AccessDenied":
		return http.StatusForbidden
	case "DryRunOperation":
		return http.StatusPreconditionFailed
	}
	return http.StatusBadRequest
}

// injectedMessage is the message sent with an injected error code.
func injectedMessage(code string) string {
	switch code {
	case "RequestLimitExceeded":
		return "Request limit exceeded."
	case "ThrottlingException":
		return "Rate exceeded"
	case "InternalError":
		return "An internal error has occurred"
	case "UnauthorizedOperation":
		return "You are not authorized to perform this operation."
	}
	return "Injected error " + code + "."
}
