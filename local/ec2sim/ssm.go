package ec2sim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// ssmActions are the SSM operations the simulator answers.
var ssmActions = map[string]bool{"GetParameter": true, "GetParameters": true}

type ssmParameterJSON struct {
	ARN              string  `json:"ARN"`
	DataType         string  `json:"DataType"`
	LastModifiedDate float64 `json:"LastModifiedDate"`
	Name             string  `json:"Name"`
	Type             string  `json:"Type"`
	Value            string  `json:"Value"`
	Version          int64   `json:"Version"`
}

// serveSSM answers the SSM JSON 1.1 protocol (X-Amz-Target:
// AmazonSSM.<Operation>) for GetParameter and GetParameters. Errors use the
// JSON error shape {"__type": code, "message": ...} and the
// X-Amzn-ErrorType header.
func (s *Server) serveSSM(w http.ResponseWriter, r *http.Request) {
	action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM.")
	body, readErr := io.ReadAll(io.LimitReader(r.Body, 1<<20))

	s.mu.Lock()
	defer s.unlock()
	now := s.clock.Now()
	s.advance(now)
	call := Call{Service: "ssm", Action: action, Time: now, Body: body}

	var out any
	err := readErr
	if err == nil {
		err = s.takeInjected(action)
	}
	if err == nil {
		switch action {
		case "GetParameter":
			out, err = s.getParameter(body)
		case "GetParameters":
			out, err = s.getParameters(body)
		default:
			err = errorf("InvalidAction", "Operation %s is not supported by the simulator.", action)
		}
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-RequestId", s.newUUID("request"))
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{Code: "InternalServerError", Message: err.Error()}
		}
		call.ErrorCode = ae.Code
		s.calls = append(s.calls, call)
		w.Header().Set("X-Amzn-ErrorType", ae.Code)
		w.WriteHeader(httpStatus(ae.Code))
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": ae.Code, "message": ae.Message})
		return
	}
	s.calls = append(s.calls, call)
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) parameterJSON(p *parameter) ssmParameterJSON {
	arn := "arn:aws:ssm:" + s.region + "::parameter" + p.name
	if !strings.HasPrefix(p.name, "/") {
		arn = "arn:aws:ssm:" + s.region + ":" + s.accountID + ":parameter/" + p.name
	}
	return ssmParameterJSON{ARN: arn, DataType: "text", LastModifiedDate: float64(p.modified.UnixMilli()) / 1000,
		Name: p.name, Type: "String", Value: p.value, Version: p.version}
}

// getParameter follows SSM GetParameter; an unknown name fails with
// ParameterNotFound.
func (s *Server) getParameter(body []byte) (any, error) {
	var in struct{ Name string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, errorf("SerializationException", "%v", err)
	}
	if in.Name == "" {
		return nil, errorf("ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
	}
	p, ok := s.params[in.Name]
	if !ok {
		return nil, errorf("ParameterNotFound", "Parameter %s not found.", in.Name)
	}
	return map[string]any{"Parameter": s.parameterJSON(p)}, nil
}

// getParameters follows SSM GetParameters: unknown names are listed in
// InvalidParameters, not an error.
func (s *Server) getParameters(body []byte) (any, error) {
	var in struct{ Names []string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, errorf("SerializationException", "%v", err)
	}
	if len(in.Names) == 0 || len(in.Names) > 10 {
		return nil, errorf("ValidationException", "1 validation error detected: Value at 'names' failed to satisfy constraint: Member must have length between 1 and 10")
	}
	params := []ssmParameterJSON{}
	invalid := []string{}
	for _, n := range in.Names {
		if p, ok := s.params[n]; ok {
			params = append(params, s.parameterJSON(p))
		} else {
			invalid = append(invalid, n)
		}
	}
	return map[string]any{"Parameters": params, "InvalidParameters": invalid}, nil
}
