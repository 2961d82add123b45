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
