// Package awstest provides in-memory doubles for the narrow EC2 and SSM
// interfaces declared by shared/aws/fleet and shared/aws/nodeclass, at the
// SDK boundary (STYLE rule 11): NewEC2 and NewSSM return a fresh double per
// test whose default behaviour is realistic (CreateFleet launches the
// cheapest available override and reports InsufficientInstanceCapacity for
// UnavailablePools, client tokens are idempotent, Describe calls apply EC2's
// filters, TerminateInstances fails on unknown IDs), and whose every call can
// be scripted (On.<Operation>.Err, .Output, Push) and inspected
// (On.<Operation>.Inputs()). A request the double does not support (an
// unknown filter name, say) fails the test. DynamoDBPages makes a DynamoDB
// stand-in page its Query answers at 1 MB, as DynamoDB does.
//
// Imported only by _test.go files and integration/. It holds no captured
// fixtures: its data is whatever each test adds.
package awstest

import (
	"errors"
	"sync"

	"github.com/aws/smithy-go"
)

// Call records the inputs of one API operation and scripts its results.
// Scripted results apply in this order: queued responses (Push), then Err,
// then Output, then the double's default behaviour. Set Err and Output
// before the code under test runs; every method is safe for concurrent use.
type Call[In, Out any] struct {
	// Err, when non-nil, is returned by every call.
	Err error
	// Output, when non-nil, is returned by every call (without error).
	Output *Out

	mu     sync.Mutex
	inputs []*In
	queue  []response[Out]
	lose   int
}

// ErrAnswerLost is what a call whose answer was lost returns: the SDK's
// view of a connection reset after the request reached AWS (the Lambda
// was killed, or the network dropped the response).
var ErrAnswerLost = errors.New("awstest: connection reset after the request was sent: answer lost")

// LoseAnswers makes the next n calls that reach the double's default
// behaviour carry it out (the instance launches, the token is recorded)
// and then return ErrAnswerLost instead of the answer. Operations that
// support it say so.
func (c *Call[In, Out]) LoseAnswers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lose = n
}

// answerLost reports whether this call's answer is to be lost, counting it.
func (c *Call[In, Out]) answerLost() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lose <= 0 {
		return false
	}
	c.lose--
	return true
}

type response[Out any] struct {
	out *Out
	err error
}

// Push queues one result for the next call that has no earlier queued
// result: output when err is nil, else err.
func (c *Call[In, Out]) Push(out *Out, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue = append(c.queue, response[Out]{out: out, err: err})
}

// Inputs returns the inputs received so far, in call order.
func (c *Call[In, Out]) Inputs() []*In {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*In(nil), c.inputs...)
}

// Count is the number of calls so far.
func (c *Call[In, Out]) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inputs)
}

// record stores in and returns a scripted result, if any.
func (c *Call[In, Out]) record(in *In) (out *Out, err error, scripted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inputs = append(c.inputs, in)
	if len(c.queue) > 0 {
		r := c.queue[0]
		c.queue = c.queue[1:]
		return r.out, r.err, true
	}
	if c.Err != nil {
		return nil, c.Err, true
	}
	if c.Output != nil {
		return c.Output, nil, true
	}
	return nil, nil, false
}

// APIError returns an AWS API error with code and message, as the SDK
// returns it for a failed call (smithy.APIError).
func APIError(code, message string) error {
	return &smithy.GenericAPIError{Code: code, Message: message, Fault: smithy.FaultClient}
}
