package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/shared/aws/ec2data"
	"github.com/nodewright/nodewright/shared/catalog"
	"github.com/nodewright/nodewright/shared/provisioning"
)

// liveUsage is the help of --live on plan and disruption.
const liveUsage = "read the region's instance types, per-zone offerings, on-demand prices (Pricing API) and Spot prices " +
	"from AWS with the Lambdas' provider, instead of the embedded tables; needs AWS credentials (the SDK's default chain) and --region. " +
	"The price source line says where every part came from"

// liveConfig is --live and what the AWS SDK is loaded with.
type liveConfig struct {
	// Enabled is --live.
	Enabled bool
	// AWS are extra options for the SDK's default configuration (tests:
	// an endpoint, credentials, an HTTP client); the environment and
	// shared config files decide the rest, AWS_ENDPOINT_URL included.
	AWS []func(*awsconfig.LoadOptions) error
}

// addLiveFlag declares --live on cmd.
func addLiveFlag(cmd *cobra.Command, live *bool) {
	cmd.Flags().BoolVar(live, "live", false, liveUsage)
}

// checkLive is the usage rule of --live: it needs an explicit --region,
// since the region decides which AWS endpoints are called. The message is
// for "nodewright <cmd>: ".
func checkLive(live bool, region string) error {
	if live && region == "" {
		return errors.New("--live: --region is required (the region whose EC2 and Pricing APIs are read)")
	}
	return nil
}

// liveSpotPriceRatio is the Spot price ratio with --live: until Spot
// prices load Spot is priced at on-demand, as the Lambdas price it
// (provisioning.FallbackSpotPriceRatio), unless --spot-price-ratio was
// given; once they load no ratio applies.
func liveSpotPriceRatio(flagValue float64, changed bool) float64 {
	if changed {
		return flagValue
	}
	return provisioning.FallbackSpotPriceRatio
}

// fetchLive reads every part of region's live EC2 data at now through
// ec2data.Provider, the refresher's provider, with EC2 and Pricing
// clients from the SDK's default configuration (Pricing signed for
// ec2data.PricingRegion). A part that fails is reported on stderr and
// left to the embedded tables (the price source says so); an error is
// returned when the configuration cannot load or no part came back.
func fetchLive(ctx context.Context, cfg liveConfig, region string, now time.Time, stderr io.Writer) (*catalog.LiveData, error) {
	opts := append([]func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(region)}, cfg.AWS...)
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("--live: load AWS configuration: %w", err)
	}
	pricingClient := pricing.NewFromConfig(awsCfg, func(o *pricing.Options) { o.Region = ec2data.PricingRegion(region) })
	provider, err := ec2data.New(ec2.NewFromConfig(awsCfg), pricingClient, region)
	if err != nil {
		return nil, fmt.Errorf("--live: %w", err)
	}
	d, fetchErr := provider.Fetch(ctx, catalog.Parts, now)
	loaded := 0
	for _, p := range catalog.Parts {
		if _, ok := d.FetchedAt(p); ok {
			loaded++
		}
	}
	if loaded == 0 {
		return nil, fmt.Errorf("--live: no EC2 data read from %s: %w", region, fetchErr)
	}
	if fetchErr != nil {
		fmt.Fprintf(stderr, "warning: --live: embedded tables stand in for what failed: %v\n", fetchErr)
	}
	return &d, nil
}
