package ddbstore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	// pkSubnet is the partition of the unavailable-subnets cache, after
	// "<cluster>#"; the sort key is the subnet ID.
	pkSubnet   = "SUBNET"
	kindSubnet = "UnavailableSubnet"
)

// UnavailableSubnet is one entry of the unavailable-subnets cache: a subnet
// that failed a launch with InsufficientFreeAddressesInSubnet (karpenter-spec
// section 4 step 5, 11.3 item 14).
type UnavailableSubnet struct {
	// SubnetID is the subnet, e.g. "subnet-0123456789abcdef0".
	SubnetID string
	// Reason is the EC2 error code that caused it.
	Reason string
	// Until is when the subnet becomes available again (millisecond
	// precision).
	Until time.Time
}

// MarkSubnetUnavailable records that subnetID cannot take instances until
// now+ttl (Karpenter uses the 3-minute UnavailableOfferingsTTL). Marking it
// again replaces its deadline and reason. The item carries the table TTL
// attribute, so DynamoDB deletes it some time after it expires. Errors: an
// empty or malformed subnet ID or a non-positive ttl (ErrInvalid), or the
// PutItem error, wrapped.
func (s *Store) MarkSubnetUnavailable(ctx context.Context, subnetID, reason string, now time.Time, ttl time.Duration) error {
	if err := checkKeyPart("subnet ID", subnetID); err != nil {
		return fmt.Errorf("mark subnet unavailable: %w", err)
	}
	if ttl <= 0 {
		return fmt.Errorf("mark subnet %s unavailable: ttl %v must be positive: %w", subnetID, ttl, ErrInvalid)
	}
	until := now.Add(ttl)
	item := map[string]types.AttributeValue{
		attrPK:        str(s.pk(pkSubnet)),
		attrSK:        str(subnetID),
		attrKind:      str(kindSubnet),
		attrUntilMs:   num(until.UnixMilli()),
		attrExpiresAt: num(ttlSeconds(until)),
	}
	if reason != "" {
		item[attrReason] = str(reason)
	}
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item}); err != nil {
		return fmt.Errorf("mark subnet %s unavailable: %w", subnetID, err)
	}
	return nil
}

// ListUnavailableSubnets returns the subnets still unavailable at now
// (Until after now), sorted by subnet ID. Expired entries are skipped even
// if DynamoDB has not deleted them yet. The read is strongly consistent.
func (s *Store) ListUnavailableSubnets(ctx context.Context, now time.Time) ([]UnavailableSubnet, error) {
	items, err := s.queryPartition(ctx, s.pk(pkSubnet))
	if err != nil {
		return nil, fmt.Errorf("list unavailable subnets: %w", err)
	}
	nowMs := now.UnixMilli()
	out := []UnavailableSubnet{}
	for _, item := range items {
		untilMs, err := getInt(item, attrUntilMs)
		if err != nil {
			return nil, fmt.Errorf("list unavailable subnets: %s: %w", getString(item, attrSK), err)
		}
		if untilMs <= nowMs {
			continue
		}
		out = append(out, UnavailableSubnet{SubnetID: getString(item, attrSK), Reason: getString(item, attrReason), Until: time.UnixMilli(untilMs).UTC()})
	}
	return out, nil
}
