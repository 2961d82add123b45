package ddbstore

import (
	"context"
	"errors"
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
	// ScopeInstanceStatus dedupes the instance-status poll's occurrences,
	// keyed by interruption.StatusDecision.Key.
	ScopeInstanceStatus = "instance-status"
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
	in := &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			attrPK:        str(pk),
			attrSK:        str(skIdempotency),
			attrKind:      str(kindIdempotency),
			attrUntilMs:   num(until.UnixMilli()),
			attrExpiresAt: num(ttlSeconds(until)),
		},
	}
	putIfExpired(in, now)
	_, err = s.api.PutItem(ctx, in)
	if isConditionFailed(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim idempotency key %s/%s: %w", scope, key, err)
	}
	return false, nil
}

// Idempotency-key states (the state attribute). A key written by
// ClaimIdempotencyKey has no state attribute and counts as done.
const (
	attrState    = "state"
	statePending = "pending"
	stateDone    = "done"
)

// KeyState is what BeginApply found for a key.
type KeyState int

// Key states.
const (
	// KeyAcquired: the caller now holds the key's pending claim and must
	// apply the message, then record the outcome with CompleteApply (applied)
	// or AbandonApply (not applied).
	KeyAcquired KeyState = iota + 1
	// KeyDone: a message with this key was applied and recorded; the caller
	// answers it as a duplicate and applies nothing.
	KeyDone
	// KeyPending: another caller holds the pending claim (its apply is in
	// flight, or it died mid-apply); the caller applies nothing and tells
	// the sender to retry after Until.
	KeyPending
)

// KeyClaim is BeginApply's answer.
type KeyClaim struct {
	State KeyState
	// Until is when the key's current record lapses: for KeyPending, the
	// moment the other caller's claim may be taken over; for KeyDone, when
	// the key is forgotten; for KeyAcquired, the end of this caller's claim.
	Until time.Time
}

// BeginApply starts applying the message with key in scope, for a caller
// that records the outcome only after the effect (nothing acknowledged that
// was not applied). With a conditional put (attribute_not_exists(pk) OR
// untilMs <= :now) it writes a pending claim held by holder until
// now+pendingFor, which must exceed the longest apply (the caller's timeout),
// so a live apply is never taken over while a claim left by a caller that
// died mid-apply lapses on its own. On condition failure a consistent read
// tells a done key (KeyDone) from another holder's pending claim
// (KeyPending). holder must be non-empty (the request ID).
func (s *Store) BeginApply(ctx context.Context, scope, key, holder string, now time.Time, pendingFor time.Duration) (KeyClaim, error) {
	pk, err := s.idempotencyPK(scope, key)
	if err != nil {
		return KeyClaim{}, fmt.Errorf("begin apply: %w", err)
	}
	if holder == "" || pendingFor <= 0 {
		return KeyClaim{}, fmt.Errorf("begin apply %s/%s: holder %q and pendingFor %v: %w", scope, key, holder, pendingFor, ErrInvalid)
	}
	until := now.Add(pendingFor)
	// A claim that vanishes between the failed put and the read (released,
	// or expired and reaped) is tried once more.
	for range 2 {
		in := &dynamodb.PutItemInput{TableName: &s.table, Item: applyItem(pk, statePending, holder, until)}
		putIfExpired(in, now)
		_, err = s.api.PutItem(ctx, in)
		if err == nil {
			return KeyClaim{State: KeyAcquired, Until: until}, nil
		}
		if !isConditionFailed(err) {
			return KeyClaim{}, fmt.Errorf("begin apply %s/%s: %w", scope, key, err)
		}
		item, gerr := s.getItem(ctx, pk, skIdempotency)
		if errors.Is(gerr, ErrNotFound) {
			continue
		}
		if gerr != nil {
			return KeyClaim{}, fmt.Errorf("begin apply %s/%s: %w", scope, key, gerr)
		}
		ms, gerr := getInt(item, attrUntilMs)
		if gerr != nil {
			return KeyClaim{}, fmt.Errorf("begin apply %s/%s: %w", scope, key, gerr)
		}
		if ms <= now.UnixMilli() {
			continue
		}
		state := KeyDone
		if getString(item, attrState) == statePending {
			state = KeyPending
		}
		return KeyClaim{State: state, Until: time.UnixMilli(ms).UTC()}, nil
	}
	return KeyClaim{}, fmt.Errorf("begin apply %s/%s: the key changed under two attempts: %w", scope, key, &ConflictError{Kind: kindIdempotency, Name: scope + "/" + key})
}

// CompleteApply records that the message with key in scope was applied:
// the key is done until now+ttl and every repeat is a duplicate. It writes
// whatever the key holds (the caller's apply happened, even if its claim had
// lapsed and another caller took it over).
func (s *Store) CompleteApply(ctx context.Context, scope, key, holder string, now time.Time, ttl time.Duration) error {
	pk, err := s.idempotencyPK(scope, key)
	if err != nil {
		return fmt.Errorf("complete apply: %w", err)
	}
	if ttl <= 0 {
		return fmt.Errorf("complete apply %s/%s: ttl %v must be positive: %w", scope, key, ttl, ErrInvalid)
	}
	until := now.Add(ttl)
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item:      applyItem(pk, stateDone, holder, until),
	})
	if err != nil {
		return fmt.Errorf("complete apply %s/%s: %w", scope, key, err)
	}
	return nil
}

// AbandonApply gives up holder's pending claim on key in scope after a
// failed apply, so the sender's retry is applied at once rather than after
// the claim lapses. It deletes the key only while holder still holds it
// pending (a claim taken over, or a key completed, is left alone) and is
// idempotent: nothing to abandon returns nil.
func (s *Store) AbandonApply(ctx context.Context, scope, key, holder string) error {
	pk, err := s.idempotencyPK(scope, key)
	if err != nil {
		return fmt.Errorf("abandon apply: %w", err)
	}
	_, err = s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       itemKey(pk, skIdempotency),
		ConditionExpression:       strPtr("#holder = :holder AND #state = :pending"),
		ExpressionAttributeNames:  map[string]string{"#holder": attrHolder, "#state": attrState},
		ExpressionAttributeValues: map[string]types.AttributeValue{":holder": str(holder), ":pending": str(statePending)},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("abandon apply %s/%s: %w", scope, key, err)
	}
	return nil
}

// applyItem is a BeginApply key in state, held by holder until until.
func applyItem(pk, state, holder string, until time.Time) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: str(pk), attrSK: str(skIdempotency), attrKind: str(kindIdempotency),
		attrState: str(state), attrHolder: str(holder),
		attrUntilMs: num(until.UnixMilli()), attrExpiresAt: num(ttlSeconds(until)),
	}
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
