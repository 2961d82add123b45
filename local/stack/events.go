package stack

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/shared/aws/ddbstore"
)

// PutEvent records e in the stack's DynamoDB store for EventTTL, as a
// Lambda does (ddbstore.Store.PutEvent, e.g. the interruption Lambda's
// SpotInterrupted): the intake API lists it on GET /v1/sync and the
// forwarder writes it as a Kubernetes Event. now is the record's write
// time. Errors are PutEvent's (ddbstore.ErrInvalid for a record without an
// ID, NodeClaim or Reason, or with a Type other than Normal or Warning).
func (s *Stack) PutEvent(ctx context.Context, e ddbstore.Event, now time.Time) error {
	if s.store == nil {
		return errors.New("put event: the stack's store is not running")
	}
	if err := s.store.PutEvent(ctx, e, now, ddbstore.EventTTL); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	return nil
}
