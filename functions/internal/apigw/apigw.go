// Package apigw is the API Gateway proxy plumbing the API's Lambdas share
// (intake, replace): the request body within v1.MaxMessageBytes, and JSON
// answers.
package apigw

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
)

// Body returns the request body (decoded when API Gateway base64-encoded
// it), refusing one over v1.MaxMessageBytes before it is decoded. Errors:
// a *v1.ValidationError for invalid base64, one wrapping
// v1.ErrMessageTooLarge for a body over the limit (v1.HTTPStatus maps
// both).
func Body(req events.APIGatewayProxyRequest) ([]byte, error) {
	if req.IsBase64Encoded {
		if len(req.Body) > base64.StdEncoding.EncodedLen(v1.MaxMessageBytes) {
			return nil, tooLarge(base64.StdEncoding.DecodedLen(len(req.Body)))
		}
		data, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return nil, &v1.ValidationError{Kind: "request", Fields: []v1.FieldError{{Path: "(body)", Message: "not valid base64: " + err.Error()}}}
		}
		if len(data) > v1.MaxMessageBytes {
			return nil, tooLarge(len(data))
		}
		return data, nil
	}
	if len(req.Body) > v1.MaxMessageBytes {
		return nil, tooLarge(len(req.Body))
	}
	return []byte(req.Body), nil
}

func tooLarge(n int) error {
	return fmt.Errorf("body of %d bytes, limit %d: %w", n, v1.MaxMessageBytes, v1.ErrMessageTooLarge)
}

// JSON answers status with v as JSON (Content-Type application/json); a
// value that cannot be encoded answers 500 with a v1.ErrorResponse.
func JSON(status int, v any) events.APIGatewayProxyResponse {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data, _ = json.Marshal(v1.ErrorResponse{Message: "encode answer: " + err.Error()})
	}
	return events.APIGatewayProxyResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(data),
	}
}
