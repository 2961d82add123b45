package ddbstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const kindLease = "Lease"

// LeaseProvisioning is the name of the per-cluster provisioning lease: the
// provisioner holds it while it solves and persists one batch, so two
// invocations never solve the same cluster at once.
const LeaseProvisioning = "provisioning"

// ErrLeaseLost means the caller no longer holds the lease (it expired and was
// taken, or was released).
var ErrLeaseLost = errors.New("lease lost")

// Lease is a named mutual-exclusion lease with an expiry.
type Lease struct {
	// Name is the lease's name, e.g. LeaseProvisioning.
	Name string
	// Holder identifies the holder, e.g. the Lambda request ID.
	Holder string
	// Until is when the lease expires (millisecond precision).
	Until time.Time
}

// LeaseHeldError reports that another holder has the lease until Until.
type LeaseHeldError struct {
	// Name is the lease's name.
	Name string
	// Holder is the current holder; "" if the lease was released between
	// the failed write and the read that looked for the holder.
	Holder string
	// Until is when the current hold expires; retrying earlier fails
	// unless the holder releases it.
	Until time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("lease %s is held by %s until %s", e.Name, e.Holder, e.Until.Format(time.RFC3339Nano))
}

// AcquireLease takes the lease name for holder until now+d. It succeeds if
// the lease is free, expired (at or before now), or already held by holder
// (which extends it); the condition is attribute_not_exists(pk) OR untilMs <=
// :now OR holder = :holder, so of several concurrent acquirers exactly one
// wins. Otherwise it returns a *LeaseHeldError naming the current holder.
//
// Leases are not fenced: choose d longer than the holder's longest run (the
// Lambda timeout), so that expiry implies the holder has stopped.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, now time.Time, d time.Duration) (Lease, error) {
	item, lease, err := s.leaseItem(name, holder, now, d)
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lease: %w", err)
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                &s.table,
		Item:                     item,
		ConditionExpression:      strPtr("attribute_not_exists(#pk) OR #until <= :now OR #holder = :holder"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#until": attrUntilMs, "#holder": attrHolder},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now":    num(now.UnixMilli()),
			":holder": str(holder),
		},
	})
	if isConditionFailed(err) {
		held, gerr := s.getItem(ctx, s.pk(pkLease), name)
		if errors.Is(gerr, ErrNotFound) {
			// Released between the write and the read: report it as
			// held by nobody in particular; the caller retries.
			return Lease{}, fmt.Errorf("acquire lease %s: %w", name, &LeaseHeldError{Name: name})
		}
		if gerr != nil {
			return Lease{}, fmt.Errorf("acquire lease %s: read holder: %w", name, gerr)
		}
		untilMs, _ := getInt(held, attrUntilMs)
		return Lease{}, fmt.Errorf("acquire lease %s: %w", name, &LeaseHeldError{
			Name:   name,
			Holder: getString(held, attrHolder),
			Until:  time.UnixMilli(untilMs).UTC(),
		})
	}
	if err != nil {
		return Lease{}, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return lease, nil
}

// RenewLease extends holder's unexpired lease to now+d (condition holder =
// :holder AND untilMs > :now). It returns ErrLeaseLost if holder does not
// hold the lease at now; the holder must then stop acting on it.
func (s *Store) RenewLease(ctx context.Context, name, holder string, now time.Time, d time.Duration) (Lease, error) {
	item, lease, err := s.leaseItem(name, holder, now, d)
	if err != nil {
		return Lease{}, fmt.Errorf("renew lease: %w", err)
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                &s.table,
		Item:                     item,
		ConditionExpression:      strPtr("#holder = :holder AND #until > :now"),
		ExpressionAttributeNames: map[string]string{"#until": attrUntilMs, "#holder": attrHolder},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now":    num(now.UnixMilli()),
			":holder": str(holder),
		},
	})
	if isConditionFailed(err) {
		return Lease{}, fmt.Errorf("renew lease %s for %s: %w", name, holder, ErrLeaseLost)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("renew lease %s: %w", name, err)
	}
	return lease, nil
}

// ReleaseLease frees the lease if holder holds it (condition holder =
// :holder). It is idempotent: it returns nil if the lease is absent or held
// by someone else, since there is nothing of holder's to release.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := checkKeyPart("lease name", name); err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       itemKey(s.pk(pkLease), name),
		ConditionExpression:       strPtr("#holder = :holder"),
		ExpressionAttributeNames:  map[string]string{"#holder": attrHolder},
		ExpressionAttributeValues: map[string]types.AttributeValue{":holder": str(holder)},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

func (s *Store) leaseItem(name, holder string, now time.Time, d time.Duration) (map[string]types.AttributeValue, Lease, error) {
	if err := checkKeyPart("lease name", name); err != nil {
		return nil, Lease{}, err
	}
	if holder == "" || len(holder) > maxKeyPart {
		return nil, Lease{}, fmt.Errorf("lease %s: holder: %d bytes, want 1 to %d: %w", name, len(holder), maxKeyPart, ErrInvalid)
	}
	if d <= 0 {
		return nil, Lease{}, fmt.Errorf("lease %s: duration %v must be positive: %w", name, d, ErrInvalid)
	}
	until := time.UnixMilli(now.Add(d).UnixMilli()).UTC()
	item := map[string]types.AttributeValue{
		attrPK:        str(s.pk(pkLease)),
		attrSK:        str(name),
		attrKind:      str(kindLease),
		attrHolder:    str(holder),
		attrUntilMs:   num(until.UnixMilli()),
		attrExpiresAt: num(ttlSeconds(until)),
	}
	return item, Lease{Name: name, Holder: holder, Until: until}, nil
}
