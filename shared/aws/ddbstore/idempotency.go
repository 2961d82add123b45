package ddbstore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	kindIdempotency = "IdempotencyKey"
	skIdempotency   = "KEY"
)

// Idempotency-key scopes used by nodewright. A scope is a namespace: the
// same key in two scopes is two keys.
const (
	// ScopeBatch dedupes pod batches posted to the intake API, keyed by the
	// forwarder's per-batch idempotency key.
	ScopeBatch = "batch"
	// ScopeInterruption dedupes EventBridge interruption events, keyed by
	// the event id.
	ScopeInterruption = "interruption"
)

// ClaimIdempotencyKey records key in scope until now+ttl with a conditional
// put (attribute_not_exists(pk) OR untilMs <= :now). It returns seen=false
// for the first claim, which the caller should then act on, and seen=true if
// the key was claimed before and has not expired. An expired key that
// DynamoDB has not deleted yet counts as unseen. scope and key must be
// non-empty and at most 512 bytes; scope must not contain '#'.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, scope, key string, now time.Time, ttl time.Duration) (seen bool, err error) {
	pk, err := s.idempotencyPK(scope, key)
	if err != nil {
		return false, fmt.Errorf("claim idempotency key: %w", err)
	}
	if ttl <= 0 {
		return false, fmt.Errorf("claim idempotency key %s/%s: ttl %v must be positive: %w", scope, key, ttl, ErrInvalid)
	}
	until := now.Add(ttl)
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			attrPK:        str(pk),
			attrSK:        str(skIdempotency),
			attrKind:      str(kindIdempotency),
			attrUntilMs:   num(until.UnixMilli()),
			attrExpiresAt: num(ttlSeconds(until)),
		},
		ConditionExpression:       strPtr("attribute_not_exists(#pk) OR #until <= :now"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#until": attrUntilMs},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixMilli())},
	})
	if isConditionFailed(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim idempotency key %s/%s: %w", scope, key, err)
	}
	return false, nil
}

// ReleaseIdempotencyKey forgets key in scope, so a later claim succeeds
// again. A caller that claimed a key and then failed to apply its effect
// releases it, so the retry is not dropped as a duplicate. It is
// idempotent: releasing an absent key returns nil.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, scope, key string) error {
	pk, err := s.idempotencyPK(scope, key)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	_, err = s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: itemKey(pk, skIdempotency)})
	if err != nil {
		return fmt.Errorf("release idempotency key %s/%s: %w", scope, key, err)
	}
	return nil
}

// idempotencyPK gives every key its own partition: keys are written at the
// rate events arrive and never listed.
func (s *Store) idempotencyPK(scope, key string) (string, error) {
	if err := checkKeyPart("scope", scope); err != nil {
		return "", err
	}
	if key == "" || len(key) > maxKeyPart {
		return "", fmt.Errorf("key: %d bytes, want 1 to %d: %w", len(key), maxKeyPart, ErrInvalid)
	}
	return s.pk(pkIdempotency, scope, key), nil
}
