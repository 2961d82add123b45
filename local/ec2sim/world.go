package ec2sim

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// World selects how the simulator's EC2 facts vary by zone and over time
// (Options.World).
type World string

// The worlds New accepts.
const (
	// WorldDefault is WorldRealistic in ap-northeast-1 (the region the
	// product's embedded price table lacks) and WorldUniform elsewhere.
	WorldDefault World = ""
	// WorldUniform offers every instance type in every zone for on-demand
	// and Spot, prices on-demand from the embedded catalog and Spot at
	// on-demand × Options.SpotPriceRatio, constant over time.
	WorldUniform World = "uniform"
	// WorldRealistic is the simulator's own region model, independent of
	// the product's rules (see Realistic world in the package docs):
	// some types are not offered in some zones, Spot prices differ per
	// zone and move every SpotPriceStep, and a region without an embedded
	// price table gets its own on-demand prices.
	WorldRealistic World = "realistic"
)

// SpotPriceStep is how often a realistic world's Spot prices may change.
const SpotPriceStep = time.Hour

// regionPriceFactors are the realistic world's on-demand multipliers over
// the us-east-1 list price, for regions the embedded catalog has no price
// table for. ap-northeast-1: 1.29, the ratio of the public on-demand Linux
// prices of m5.large in ap-northeast-1 and us-east-1 (0.124 / 0.096 USD
// per hour, AWS EC2 on-demand pricing page). Other such regions use
// defaultRegionPriceFactor.
var regionPriceFactors = map[string]float64{"ap-northeast-1": 1.29}

const defaultRegionPriceFactor = 1.1

// pricePoint is one Spot price from a time on (SetSpotPrice).
type pricePoint struct {
	at    time.Time
	price float64
}

// realistic reports whether w, in region, is the realistic world.
func (w World) realistic(region string) bool {
	return w == WorldRealistic || w == WorldDefault && region == "ap-northeast-1"
}

// worldHash is the deterministic draw every realistic rule uses: the
// first 8 bytes of SHA-256 over the key parts joined by "/".
func worldHash(parts ...string) uint64 {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{'/'})
		}
		h.Write([]byte(p))
	}
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// offeredIn reports whether the region offers instance type name in zone
// z. Uniform: always. Realistic: a type is missing from a zone when
// worldHash(region, type, zone) % 6 == 0 (about one pool in six), except
// that every type stays offered in the zone with the smallest hash, so no
// type vanishes from the region.
func (s *Server) offeredIn(name, z string) bool {
	if !s.realistic {
		return true
	}
	if worldHash(s.region, name, z)%6 != 0 {
		return true
	}
	keep := ""
	var best uint64 = math.MaxUint64
	for _, zz := range s.zones {
		if h := worldHash(s.region, name, zz.name); h < best {
			best, keep = h, zz.name
		}
	}
	return z == keep
}

// Offered reports whether the simulated region offers instanceType in
// zone, as DescribeInstanceTypeOfferings (LocationType
// availability-zone) answers. Unknown types and zones are not offered.
func (s *Server) Offered(instanceType, zone string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, okZone := s.zoneByName(zone)
	return s.types.byName[instanceType] != nil && okZone && s.offeredIn(instanceType, zone)
}

// onDemandPrice is the on-demand Linux price per hour of f in this
// region: the embedded catalog's price, except in a realistic world of a
// region the catalog has no table for, where it is the us-east-1 price ×
// the region's factor (regionPriceFactors) × a per-type variation of
// ±4% (worldHash(region, type) % 81 − 40, in thousandths), rounded to 4
// decimals. 0 when the catalog has no price. A type AddInstanceType added
// costs exactly the price it was added with.
func (s *Server) onDemandPrice(f *typeFacts) float64 {
	if !s.realistic || !s.types.fallbackPrices || f.onDemand == 0 || f.served != nil {
		return f.onDemand
	}
	factor, ok := regionPriceFactors[s.region]
	if !ok {
		factor = defaultRegionPriceFactor
	}
	v := float64(int64(worldHash(s.region, f.name)%81)-40) / 1000
	return roundPrice(f.onDemand * factor * (1 + v))
}

// modelSpotPrice is the realistic world's Spot price of pool (f, zone)
// during step k (Unix time / SpotPriceStep): on-demand × a per-pool ratio
// between 0.25 and 0.40 (worldHash(region, type, zone) % 16, in
// hundredths, over 0.25) × a per-step move of ±10%
// (worldHash(region, type, zone, k) % 21 − 10, in hundredths), rounded to
// 4 decimals. Uniform worlds use on-demand × Options.SpotPriceRatio at
// every step.
func (s *Server) modelSpotPrice(f *typeFacts, zone string, k int64) float64 {
	od := s.onDemandPrice(f)
	if !s.realistic {
		return roundPrice(od * s.spotRatio)
	}
	ratio := 0.25 + float64(worldHash(s.region, f.name, zone)%16)/100
	move := 1 + (float64(worldHash(s.region, f.name, zone, fmt.Sprint(k))%21)-10)/100
	return roundPrice(od * ratio * move)
}

func spotStep(t time.Time) int64 {
	return int64(math.Floor(float64(t.Unix()) / SpotPriceStep.Seconds()))
}

// spotPriceAt returns the Spot price of pool (f, zone) in effect at t and
// when it took effect: the latest SetSpotPrice point at or before t, which
// holds until the next one, else the model price of t's step, effective
// from the step's start (uniform worlds: from the simulator's start).
// ok is false when the type has no price.
func (s *Server) spotPriceAt(f *typeFacts, zone string, t time.Time) (price float64, since time.Time, ok bool) {
	pts := s.spotPrice[poolKey{f.name, zone}]
	for i := len(pts) - 1; i >= 0; i-- {
		if !pts[i].at.After(t) {
			return pts[i].price, pts[i].at, true
		}
	}
	if s.onDemandPrice(f) == 0 {
		return 0, time.Time{}, false
	}
	k := spotStep(t)
	since = time.Unix(k*int64(SpotPriceStep.Seconds()), 0).UTC()
	if !s.realistic || since.Before(s.born) {
		since = s.born
	}
	return s.modelSpotPrice(f, zone, k), since, true
}

// spotHistory returns the Spot price points of pool (f, zone) between
// start and end, newest first, as DescribeSpotPriceHistory does: every
// change in (start, end] plus the point in effect at start. History
// begins when the simulator was created.
func (s *Server) spotHistory(f *typeFacts, zone string, start, end time.Time) []pricePoint {
	if start.Before(s.born) {
		start = s.born
	}
	if end.Before(start) {
		return nil
	}
	var out []pricePoint
	t := end
	for {
		p, since, ok := s.spotPriceAt(f, zone, t)
		if !ok {
			return out
		}
		if len(out) == 0 || out[len(out)-1].price != p || !s.realistic {
			out = append(out, pricePoint{at: since, price: p})
		} else {
			out[len(out)-1].at = since // same price: one point from its first step
		}
		if !since.After(start) {
			break
		}
		t = since.Add(-time.Nanosecond)
	}
	return slices.Clip(out)
}
