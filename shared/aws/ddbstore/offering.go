package ddbstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodewright/nodewright/shared/catalog"
)

const (
	kindOffering = "UnavailableOffering"
	// anyValue stands for an empty OfferingKey field in the sort key.
	anyValue = "*"
)

// UnavailableOffering is one entry of the unavailable-offerings cache.
type UnavailableOffering struct {
	catalog.OfferingKey
	// Reason is the EC2 error code that caused it, e.g.
	// "InsufficientInstanceCapacity".
	Reason string
	// Until is when the offering becomes available again (millisecond
	// precision).
	Until time.Time
}

// offeringSortKey is the sort key of k: its fields joined by "#", "*" for
// an empty one, with "#<reservation ID>" after them when k names a
// capacity reservation.
func offeringSortKey(k catalog.OfferingKey) (string, error) {
	parts := []string{k.CapacityType, k.InstanceType, k.Zone}
	names := []string{"capacity type", "instance type", "zone"}
	for i, p := range parts {
		if p == "" {
			parts[i] = anyValue
			continue
		}
		if p == anyValue {
			return "", fmt.Errorf("%s %q: leave it empty to mean any: %w", names[i], p, ErrInvalid)
		}
		if err := checkKeyPart(names[i], p); err != nil {
			return "", err
		}
	}
	if parts[0] == anyValue && parts[1] == anyValue && parts[2] == anyValue {
		return "", fmt.Errorf("offering: at least one field must be set: %w", ErrInvalid)
	}
	if k.ReservationID != "" {
		if err := checkKeyPart("capacity reservation id", k.ReservationID); err != nil {
			return "", err
		}
		parts = append(parts, k.ReservationID)
	}
	return strings.Join(parts, "#"), nil
}

func offeringKeyFromSortKey(sk string) catalog.OfferingKey {
	parts := strings.SplitN(sk, "#", 4)
	reservation := ""
	if len(parts) == 4 {
		reservation, parts = parts[3], parts[:3]
	}
	for len(parts) < 3 {
		parts = append(parts, anyValue)
	}
	for i := range parts {
		if parts[i] == anyValue {
			parts[i] = ""
		}
	}
	return catalog.OfferingKey{CapacityType: parts[0], InstanceType: parts[1], Zone: parts[2], ReservationID: reservation}
}

// MarkUnavailable records that offering cannot be launched until now+ttl
// (use catalog.UnavailableOfferingsTTL for capacity errors). Marking an offering
// again replaces its deadline and reason (the latest error wins, as in
// Karpenter's cache). The item carries the table TTL attribute, so DynamoDB
// deletes it some time after it expires.
func (s *Store) MarkUnavailable(ctx context.Context, offering catalog.OfferingKey, reason string, now time.Time, ttl time.Duration) error {
	sk, err := offeringSortKey(offering)
	if err != nil {
		return fmt.Errorf("mark offering unavailable: %w", err)
	}
	if ttl <= 0 {
		return fmt.Errorf("mark offering %s unavailable: ttl %v must be positive: %w", sk, ttl, ErrInvalid)
	}
	until := now.Add(ttl)
	item := map[string]types.AttributeValue{
		attrPK:        str(s.pk(pkOffering)),
		attrSK:        str(sk),
		attrKind:      str(kindOffering),
		attrUntilMs:   num(until.UnixMilli()),
		attrExpiresAt: num(ttlSeconds(until)),
	}
	if reason != "" {
		item[attrReason] = str(reason)
	}
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item}); err != nil {
		return fmt.Errorf("mark offering %s unavailable: %w", sk, err)
	}
	return nil
}

// ListUnavailable returns the offerings still unavailable at now (Until
// after now), sorted by capacity type, instance type and zone (an empty,
// "any" field sorts before the values of that field). Expired
// entries are skipped even if DynamoDB has not deleted them yet (TTL
// deletion is lazy). The read is strongly consistent.
func (s *Store) ListUnavailable(ctx context.Context, now time.Time) ([]UnavailableOffering, error) {
	items, err := s.queryPartition(ctx, s.pk(pkOffering))
	if err != nil {
		return nil, fmt.Errorf("list unavailable offerings: %w", err)
	}
	nowMs := now.UnixMilli()
	out := []UnavailableOffering{}
	for _, item := range items {
		untilMs, err := getInt(item, attrUntilMs)
		if err != nil {
			return nil, fmt.Errorf("list unavailable offerings: %s: %w", getString(item, attrSK), err)
		}
		if untilMs <= nowMs {
			continue
		}
		out = append(out, UnavailableOffering{
			OfferingKey: offeringKeyFromSortKey(getString(item, attrSK)),
			Reason:      getString(item, attrReason),
			Until:       time.UnixMilli(untilMs).UTC(),
		})
	}
	return out, nil
}
