package ddbstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/shared/catalog"
)

// The region's live EC2 data (catalog.LiveData) is stored one part per
// blob (gzip, chunked when large; see putBlob), in partition
// "<cluster>#EC2DATA#<part>" (part: instance-types, offerings,
// on-demand-prices, spot-prices). Each blob holds the part's JSON with its
// region and fetchedAt, so every reader knows the data's age. One
// refresher writes (the housekeeping Lambda); every Lambda reads, so a
// cold start reads four items instead of describing the region. A part is
// replaced whole: its head names its chunks by content hash, so a reader
// never mixes two refreshes.
const (
	pkEC2Data   = "EC2DATA"
	kindEC2Data = "EC2Data"
	// EC2DataRetention is how long a stored part stays readable after its
	// fetch without a newer one (then it reads as absent, and TTL removes
	// it): long past catalog.StaleAfter, so a refresher that keeps failing
	// leaves stale data in use, as Karpenter keeps its last answer.
	EC2DataRetention = 30 * 24 * time.Hour
)

// ec2DataPart is the stored form of one part.
type ec2DataPart struct {
	Region         string                     `json:"region"`
	InstanceTypes  *catalog.LiveInstanceTypes `json:"instanceTypes,omitempty"`
	Offerings      *catalog.LiveOfferings     `json:"offerings,omitempty"`
	OnDemandPrices *catalog.LivePrices        `json:"onDemandPrices,omitempty"`
	SpotPrices     *catalog.LiveSpotPrices    `json:"spotPrices,omitempty"`
}

// PutEC2Data stores every part d holds, each replacing the stored part of
// the same name and readable until its fetchedAt + EC2DataRetention; parts
// d lacks are left as stored. Errors: ErrInvalid for d without a region,
// ErrItemTooLarge for a part past MaxBlobChunks, DynamoDB failures,
// wrapped with the part's name (parts before it are stored).
func (s *Store) PutEC2Data(ctx context.Context, d catalog.LiveData) error {
	if d.Region == "" {
		return fmt.Errorf("put ec2 data: region: %w", ErrInvalid)
	}
	for _, part := range catalog.Parts {
		at, ok := d.FetchedAt(part)
		if !ok {
			continue
		}
		one := ec2DataPart{Region: d.Region}
		switch part {
		case catalog.PartInstanceTypes:
			one.InstanceTypes = d.InstanceTypes
		case catalog.PartOfferings:
			one.Offerings = d.Offerings
		case catalog.PartOnDemandPrices:
			one.OnDemandPrices = d.OnDemandPrices
		case catalog.PartSpotPrices:
			one.SpotPrices = d.SpotPrices
		}
		raw, err := json.Marshal(one)
		if err != nil {
			return fmt.Errorf("put ec2 data %s: %w", part, err)
		}
		if err := s.putBlob(ctx, s.pk(pkEC2Data, string(part)), kindEC2Data, raw, at.Add(EC2DataRetention)); err != nil {
			return fmt.Errorf("put ec2 data %s: %w", part, err)
		}
	}
	return nil
}

// EC2Data returns the stored parts for region at now; a part never stored,
// expired, or stored for another region is nil (the caller falls back to
// the embedded tables for it). Errors are DynamoDB failures and parts that
// do not decode, wrapped with the part's name.
func (s *Store) EC2Data(ctx context.Context, region string, now time.Time) (catalog.LiveData, error) {
	out := catalog.LiveData{Region: region}
	for _, part := range catalog.Parts {
		raw, err := s.getBlob(ctx, s.pk(pkEC2Data, string(part)), now)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return catalog.LiveData{}, fmt.Errorf("read ec2 data %s: %w", part, err)
		}
		var one ec2DataPart
		if err := json.Unmarshal(raw, &one); err != nil {
			return catalog.LiveData{}, fmt.Errorf("read ec2 data %s: decode: %w", part, err)
		}
		if one.Region != region {
			continue
		}
		switch part {
		case catalog.PartInstanceTypes:
			out.InstanceTypes = one.InstanceTypes
		case catalog.PartOfferings:
			out.Offerings = one.Offerings
		case catalog.PartOnDemandPrices:
			out.OnDemandPrices = one.OnDemandPrices
		case catalog.PartSpotPrices:
			out.SpotPrices = one.SpotPrices
		}
	}
	return out, nil
}
