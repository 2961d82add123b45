package awstest

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// SSMCalls holds the scriptable calls of an SSM double.
type SSMCalls struct {
	GetParameter Call[ssm.GetParameterInput, ssm.GetParameterOutput]
}

// SSM is an in-memory SSM Parameter Store for nodeclass.SSMAPI.
type SSM struct {
	// On scripts and records each operation.
	On SSMCalls

	t      testing.TB
	mu     sync.Mutex
	params map[string]string
}

// NewSSM returns an SSM double with no parameters.
func NewSSM(t testing.TB) *SSM {
	return &SSM{t: t, params: map[string]string{}}
}

// Put sets a parameter's value.
func (s *SSM) Put(name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.params[name] = value
}

// GetParameter returns a parameter; a missing one fails with
// ParameterNotFound, as SSM does.
func (s *SSM) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	if out, err, ok := s.On.GetParameter.record(in); ok {
		return out, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := aws.ToString(in.Name)
	v, ok := s.params[name]
	if !ok {
		return nil, APIError("ParameterNotFound", "parameter "+name+" not found")
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: aws.String(name), Value: aws.String(v), Type: ssmtypes.ParameterTypeString}}, nil
}
