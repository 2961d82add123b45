package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodewright/nodewright/shared/apis/v1"
	"github.com/nodewright/nodewright/shared/catalog"
)

// FallbackSpotPriceRatio is the SpotPriceRatio the Lambdas run with: until
// Spot prices are loaded (first start, DescribeSpotPriceHistory
// unreachable) a Spot offering is priced at the on-demand price, as
// Karpenter prices Spot before its first Spot refresh (aws:
// pkg/providers/pricing: the initial Spot prices are the static on-demand
// table). No discount is invented; once Spot prices load, the ratio no
// longer applies and a Spot offering without a price is unavailable.
const FallbackSpotPriceRatio = 1.0

// EC2DataSource reads the region's live EC2 data the refresher stored
// (functions/internal/adapters EC2Data over ddbstore). Parts never stored
// are nil.
type EC2DataSource interface {
	EC2Data(ctx context.Context, now time.Time) (catalog.LiveData, error)
}

// ReadLiveData reads the live EC2 data through src (nil: none) for
// LaunchOptions.Live; every loader of launch state (Provisioner, the
// disruption Lambda) calls it. A read failure is not fatal: the caller
// falls back to the embedded tables and the returned warning says so.
func ReadLiveData(ctx context.Context, src EC2DataSource, now time.Time) (*catalog.LiveData, string) {
	if src == nil {
		return nil, ""
	}
	d, err := src.EC2Data(ctx, now)
	if err != nil {
		return nil, fmt.Sprintf("live EC2 data unreadable, embedded tables used: %v", err)
	}
	return &d, ""
}

// FallbackWarning returns the warning a round logs (and the status
// reports) when src is not wholly live and fresh: which parts came from
// the embedded tables or an estimate, and which live parts are stale; ""
// when every part is live and fresh, and when src has no Parts (no live
// data wired: offline use, whose output prints src.Description itself).
func FallbackWarning(src catalog.PriceSource) string {
	var fallback, stale []string
	for _, p := range src.Parts {
		switch {
		case !p.Live:
			fallback = append(fallback, fmt.Sprintf("%s from %s", p.Part, p.Source))
		case p.Stale:
			stale = append(stale, fmt.Sprintf("%s fetched %s ago", p.Part, p.Age.Round(time.Minute)))
		}
	}
	var b []string
	if len(fallback) > 0 {
		b = append(b, "fallback: "+strings.Join(fallback, ", "))
	}
	if len(stale) > 0 {
		b = append(b, "stale: "+strings.Join(stale, ", "))
	}
	if len(b) == 0 {
		return ""
	}
	return "EC2 data: " + strings.Join(b, "; ")
}

// EC2DataCondition is the informational EC2DataLive condition of a class
// resolved with src (LaunchClass.PriceSource), stamped with generation;
// unreadable is ReadLiveData's warning when the stored data could not be
// read ("" otherwise) and isolatedVPC the deployment's isolatedVPC option.
// ok is false when no live data is wired (src has no Parts and nothing was
// unreadable: offline use), where the class gets no such condition.
//
// The reasons, first match wins: Unreadable; AwaitingFirstRefresh (no
// part loaded); RefreshFailed (a part other than on-demand prices under
// isolatedVPC is missing while others are loaded); Stale (a live part is
// older than catalog.StaleAfter); IsolatedVPC (only the on-demand prices
// are embedded, as isolatedVPC requires); Live (Status True). The message
// names every part's source: "live, fetched <RFC 3339> (<N>h ago)" with
// the age in whole hours, so the message (and the stored status) changes
// at most hourly between refreshes, or the embedded stand-in.
func EC2DataCondition(src catalog.PriceSource, unreadable string, isolatedVPC bool, generation int64) (metav1.Condition, bool) {
	c := metav1.Condition{Type: v1.ConditionTypeEC2DataLive, Status: metav1.ConditionFalse, ObservedGeneration: generation}
	if unreadable != "" {
		c.Reason, c.Message = v1.ConditionReasonEC2DataUnreadable, unreadable
		return c, true
	}
	if len(src.Parts) == 0 {
		return metav1.Condition{}, false
	}
	var live, missing, stale int
	isolatedOnly := true
	parts := make([]string, 0, len(src.Parts))
	for _, p := range src.Parts {
		if !p.Live {
			missing++
			isolatedOnly = isolatedOnly && isolatedVPC && p.Part == catalog.PartOnDemandPrices
			parts = append(parts, fmt.Sprintf("%s: %s", p.Part, p.Source))
			continue
		}
		live++
		desc := fmt.Sprintf("%s: live, fetched %s", p.Part, p.FetchedAt.UTC().Format(time.RFC3339))
		if p.Age > 0 {
			desc += fmt.Sprintf(" (%dh ago", int64(p.Age/time.Hour))
			if p.Stale {
				stale++
				desc += ", stale"
			}
			desc += ")"
		}
		parts = append(parts, desc)
	}
	c.Message = strings.Join(parts, "; ")
	switch {
	case live == 0:
		c.Reason = v1.ConditionReasonEC2DataAwaitingRefresh
	case missing > 0 && !isolatedOnly:
		c.Reason = v1.ConditionReasonEC2DataRefreshFailed
	case stale > 0:
		c.Reason = v1.ConditionReasonEC2DataStale
	case missing > 0:
		c.Reason = v1.ConditionReasonEC2DataIsolatedVPC
	default:
		c.Status, c.Reason = metav1.ConditionTrue, v1.ConditionReasonEC2DataLive
	}
	return c, true
}

// ec2DataStore keeps the region's live EC2 data (*ddbstore.Store through
// an adapter).
type ec2DataStore interface {
	EC2DataSource
	PutEC2Data(ctx context.Context, d catalog.LiveData) error
}

// ec2DataFetcher fetches parts of the live data from the region's APIs
// (*ec2data.Provider). It returns the parts that succeeded and an error
// naming each that failed.
type ec2DataFetcher interface {
	Fetch(ctx context.Context, parts []catalog.Part, now time.Time) (catalog.LiveData, error)
}

// EC2DataRefresher is the one writer of the live EC2 data: run every
// minute by the housekeeping Lambda, it fetches only the parts that are
// missing or catalog.RefreshInterval old (Karpenter's 12-hour pricing and
// instance-type timers), so most runs make no AWS call, and a cold start of
// any Lambda reads DynamoDB instead of describing the region. It holds no
// state between calls.
type EC2DataRefresher struct {
	store       ec2DataStore
	fetcher     ec2DataFetcher
	isolatedVPC bool
}

// NewEC2DataRefresher returns a refresher; with isolatedVPC on-demand
// prices are never fetched (Karpenter's ISOLATED_VPC: no Pricing API).
func NewEC2DataRefresher(store ec2DataStore, fetcher ec2DataFetcher, isolatedVPC bool) (*EC2DataRefresher, error) {
	if store == nil || fetcher == nil {
		return nil, fmt.Errorf("ec2 data refresher: store and fetcher: %w", errMissing)
	}
	return &EC2DataRefresher{store: store, fetcher: fetcher, isolatedVPC: isolatedVPC}, nil
}

// RefreshResult says what one Refresh did.
type RefreshResult struct {
	// Due are the parts that needed fetching; Stored those fetched and
	// stored. A due part not stored keeps its previous copy (or stays
	// absent: the embedded tables stand in).
	Due, Stored []catalog.Part
}

// ErrRefreshIncomplete wraps the failure of a due part: the parts that
// were fetched are stored regardless.
var ErrRefreshIncomplete = errors.New("ec2 data refresh incomplete")

// Refresh reads the stored data, fetches the parts due at now and stores
// those that came back. Errors: a failed read or write of the store, or
// ErrRefreshIncomplete joined with each failed part's error (throttling,
// unreachable API, an answer that does not parse).
func (r *EC2DataRefresher) Refresh(ctx context.Context, now time.Time) (RefreshResult, error) {
	stored, err := r.store.EC2Data(ctx, now)
	if err != nil {
		return RefreshResult{}, fmt.Errorf("refresh ec2 data: read stored: %w", err)
	}
	res := RefreshResult{Due: stored.Due(now, r.isolatedVPC)}
	if len(res.Due) == 0 {
		return res, nil
	}
	fresh, fetchErr := r.fetcher.Fetch(ctx, res.Due, now)
	for _, p := range res.Due {
		if _, ok := fresh.FetchedAt(p); ok {
			res.Stored = append(res.Stored, p)
		}
	}
	if len(res.Stored) > 0 {
		if err := r.store.PutEC2Data(ctx, fresh); err != nil {
			return RefreshResult{Due: res.Due}, fmt.Errorf("refresh ec2 data: store: %w", err)
		}
	}
	if fetchErr != nil {
		return res, fmt.Errorf("refresh ec2 data: %w: %w", ErrRefreshIncomplete, fetchErr)
	}
	return res, nil
}
