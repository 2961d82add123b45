package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

const (
	kindPayload = "Payload"
	pkPayload   = "PAYLOAD"
)

// PutPayload stores data under key until now+ttl: the claim check for a
// queue message too large for SQS (the intake API stores the message here
// and enqueues only key; the consumer reads it back with GetPayload). Data
// is stored as a blob (gzip, chunked). key must be a usable key part
// (non-empty, at most 512 bytes, no '#'); ttl must be positive and should
// exceed the queue's retention. Storing the same key again replaces it.
func (s *Store) PutPayload(ctx context.Context, key string, data []byte, now time.Time, ttl time.Duration) error {
	if err := checkKeyPart("payload key", key); err != nil {
		return fmt.Errorf("put payload: %w", err)
	}
	if ttl <= 0 {
		return fmt.Errorf("put payload %s: ttl %v must be positive: %w", key, ttl, ErrInvalid)
	}
	if err := s.putBlob(ctx, s.pk(pkPayload, key), kindPayload, data, now.Add(ttl)); err != nil {
		return fmt.Errorf("put payload %s: %w", key, err)
	}
	return nil
}

// GetPayload returns the payload stored under key, or ErrNotFound when
// there is none or it expired at now.
func (s *Store) GetPayload(ctx context.Context, key string, now time.Time) ([]byte, error) {
	if err := checkKeyPart("payload key", key); err != nil {
		return nil, fmt.Errorf("get payload: %w", err)
	}
	data, err := s.getBlob(ctx, s.pk(pkPayload, key), now)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("get payload %s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("get payload %s: %w", key, err)
	}
	return data, nil
}

// PutPayloadOnce stores data under key until now+ttl unless a payload
// unexpired at now is stored there already, and returns the payload that
// is stored: data when this call wrote it, else the earlier one, byte for
// byte (the first writer wins; a conditional write decides races). Keys
// and ttl are checked as in PutPayload.
func (s *Store) PutPayloadOnce(ctx context.Context, key string, data []byte, now time.Time, ttl time.Duration) ([]byte, error) {
	if err := checkKeyPart("payload key", key); err != nil {
		return nil, fmt.Errorf("put payload once: %w", err)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("put payload %s once: ttl %v must be positive: %w", key, ttl, ErrInvalid)
	}
	err := s.writeBlob(ctx, s.pk(pkPayload, key), kindPayload, data, now.Add(ttl), now)
	if err == nil {
		return data, nil
	}
	if !isConditionFailed(err) {
		return nil, fmt.Errorf("put payload %s once: %w", key, err)
	}
	stored, err := s.GetPayload(ctx, key, now)
	if err != nil {
		return nil, fmt.Errorf("put payload %s once: read the stored one: %w", key, err)
	}
	return stored, nil
}
