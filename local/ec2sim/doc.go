// Package ec2sim is an in-process stand-in for the EC2 and SSM APIs that
// the unmodified aws-sdk-go-v2 clients talk to: point a client's
// BaseEndpoint at an httptest.Server wrapping a *Server (or at the local
// stack's listener) and every call below goes over real HTTP, through the
// SDK's own serializers, signers, retryers and deserializers. Give such
// clients an HTTPClient whose transport is LoopbackTransport: without it,
// aws-sdk-go-v2 and net/http race on loopback and about one large answer
// in four fails with "use of closed network connection".
//
// # Protocols
//
// EC2 is the Query protocol of API version 2016-11-15: form-encoded
// requests (Action=..., lists flattened as Name.N), XML responses in the
// http://ec2.amazonaws.com/doc/2016-11-15/ namespace, and errors in the
// <Response><Errors><Error><Code/><Message/></Error></Errors> envelope with
// EC2's HTTP statuses (503 for RequestLimitExceeded). SSM is the JSON 1.1
// protocol (X-Amz-Target: AmazonSSM.<Operation>), errors as
// {"__type": code}. The Price List Query API is JSON 1.1 too
// (X-Amz-Target: AWSPriceListService.<Operation>) on the same listener,
// which the local stack gives the Lambdas as AWS_ENDPOINT_URL_PRICING.
// Signatures are not checked.
//
// # Operations
//
// EC2: CreateFleet (instant), DescribeInstances, TerminateInstances,
// CreateTags, DescribeInstanceTypes, DescribeInstanceTypeOfferings,
// DescribeSpotPriceHistory, DescribeAvailabilityZones, DescribeSubnets,
// DescribeSecurityGroups, DescribeImages, CreateLaunchTemplate,
// DescribeLaunchTemplates, DescribeLaunchTemplateVersions,
// DeleteLaunchTemplate, DescribePlacementGroups (groups seeded with
// AddPlacementGroup; CreateFleet launches into the launch template's
// Placement group, spreading a partition group's instances over its
// partitions unless the template names one, and records Placement.Tenancy)
// and DescribeCapacityReservations (reservations.go: ODCRs and capacity
// blocks added through AddCapacityReservation, their AvailableInstanceCount
// kept as launches use them and terminations free them). SSM: GetParameter
// and GetParameters. Pricing:
// GetProducts (ServiceCode AmazonEC2, filters TERM_MATCH, EQUALS,
// CONTAINS, ANY_OF, NONE_OF, FormatVersion aws_v1, MaxResults 1 to 100,
// NextToken; PriceList entries as JSON strings in the Price List's
// product/terms shape). Any other action fails with InvalidAction. Each handler's comment states the EC2
// behaviour it follows (ID checks, filters, pagination, idempotency).
//
// # Seeded world
//
// New seeds, for Options.ClusterName (default "nodewright") in
// Options.Region (default us-east-1, zones a, b, c; ap-northeast-1 gets a,
// c, d): a VPC 10.0.0.0/16 with one private /20 subnet per zone tagged
// karpenter.sh/discovery=<cluster> and one public /22 subnet per zone; the
// default, EKS cluster and node security groups (the node group tagged for
// discovery); and for each of Options.KubernetesVersions the EKS-optimized
// AMIs (AL2023 standard/nvidia/neuron, AL2 below 1.33, Bottlerocket
// standard/nvidia, Windows 2019/2022, 2025 from 1.35) in an older, now
// deprecated release (v20240807, Bottlerocket 1.24.0) and a current one
// (v20250920, Bottlerocket 1.46.0), with the public SSM parameters of
// karpenter-spec §9.1 pointing at them: "recommended"/"latest" at the
// current release, the versioned paths (al2023@v20240807 →
// .../amazon-eks-node-al2023-x86_64-standard-1.33-v20240807/image_id) at
// their own. Instance types come from the embedded catalog
// (shared/catalog); what the region offers and charges depends on the
// world (Options.World).
//
// # Worlds
//
// The uniform world (the default outside ap-northeast-1, and what the
// local stack runs unless told otherwise) offers every type in every zone
// for on-demand and Spot, charges the catalog's on-demand price and Spot at
// on-demand × Options.SpotPriceRatio, constant over time: the product's
// own offline assumptions, kept so that tests written against them hold.
//
// The realistic world (the default in ap-northeast-1, and
// Options.World = WorldRealistic in any region) is the simulator's own
// model, sharing no rule with the product, every draw a SHA-256 of the
// region, type, zone (and step) so it is the same on every start:
//   - offerings: a type is missing from a zone when the draw for (region,
//     type, zone) is 0 mod 6 (about one pool in six), except in the zone
//     with the smallest draw, so every type is offered somewhere;
//     DescribeInstanceTypeOfferings, DescribeSpotPriceHistory and
//     GetProducts follow it, and CreateFleet answers such a pool with the
//     per-override error Unsupported, naming the zones that offer it, as
//     EC2 does;
//   - on-demand prices: in a region the catalog has no price table for
//     (ap-northeast-1), the us-east-1 price × the region's factor (1.29 for
//     ap-northeast-1, from the public m5.large prices 0.124 / 0.096 USD per
//     hour; 1.1 for other such regions) × a per-type variation of ±4%,
//     rounded to 4 decimals; regions with a table keep the table's price;
//   - Spot prices: on-demand × a per-pool ratio between 0.25 and 0.40 × a
//     move of ±10% drawn for every SpotPriceStep (one hour) of the clock,
//     so prices differ per zone and change as the clock advances.
//
// In both worlds SetSpotPrice (or POST /_sim/spot-price) sets one pool's
// price from the simulator's now on, replacing the model for that pool;
// each call is one more DescribeSpotPriceHistory point. Price reports what
// any pool costs now, Offered whether a zone offers a type.
//
// # Time and faults
//
// Every time-dependent behaviour reads Options.Clock (use a FakeClock in
// tests): instances stay pending for the boot delay, shut down for
// Options.ShutdownDelay, stay described for an hour once terminated, and a
// Spot interruption warning (InterruptSpot) is followed by the reclaim two
// minutes later. Faults are injected through the Go API or the /_sim/
// control routes (see serveControl): insufficient capacity per offering
// (SetUnavailable), any error code for the next N calls of an action
// (InjectError, Throttle), instance failure (FailInstance). Every call is
// recorded (Calls) with its parameters and error code, and instances keep
// their user data, launch template, tags and volumes (Instance) so the
// local stack can turn them into Nodes.
//
// # Events
//
// With an event sink (SetEventSink) the simulator emits the EventBridge
// events EC2 sends, in the shape EventBridge delivers to an SQS target
// (Event): an instance state-change notification per transition, a Spot
// interruption warning from InterruptSpot and a rebalance recommendation
// from RecommendRebalance (also POST /_sim/instances/{id}/rebalance).
// Transitions due on the clock are applied when the simulator is next
// called, so their events come then, stamped with the transition's time.
//
// # Deviations from EC2
//
//   - Only instant fleets; DefaultTargetCapacityType spot, on-demand,
//     capacity-block or reserved-capacity (the last two need the launch
//     template's CapacityReservationTarget); no weighted capacity,
//     MinTargetCapacity, SingleInstanceType, SingleAvailabilityZone or
//     attribute-based selection (InstanceRequirements): every override
//     names an instance type, directly or through its launch template.
//   - Allocation has no capacity model: lowest-price, price-capacity-
//     optimized, capacity-optimized and diversified all take the cheapest
//     pool that can launch (ties in request order); prioritized and
//     capacity-optimized-prioritized take the lowest Priority. All units of
//     one call go to that pool, so diversified does not spread.
//   - A launch template has exactly one version (no
//     CreateLaunchTemplateVersion); versions other than 1, $Latest and
//     $Default do not exist.
//   - An unknown launch template or subnet in CreateFleet fails the whole
//     call (InvalidLaunchTemplateName.NotFoundException, as Karpenter
//     expects); per-pool problems (capacity, AMI, security groups, free
//     addresses, Spot price) are per-override errors.
//   - Capacity reservations: the error codes for a targeted launch EC2
//     refuses are the simulator's choice where EC2 documents none
//     (InvalidCapacityReservationId.NotFound for an unknown or inactive
//     target, InvalidParameterCombination for a type or zone mismatch);
//     a full target is ReservationCapacityExceeded. Tenancy is default,
//     there are no reservation fleets, no billing-owner sharing and no
//     Capacity Block offerings to purchase.
//   - ClientToken idempotency never expires (EC2 keeps tokens for a limited
//     time).
//   - DescribeInstanceTypes is derived from the catalog's label data:
//     network cards are reported as one card whose interface count is the
//     default card's, local storage as one NVMe disk, cores as vCPUs/2 for
//     x86 (vCPUs for AWS Graviton), one architecture per type (EC2 lists
//     i386 and x86_64 for some older types), every type as current
//     generation with usage classes on-demand and Spot; GPU and
//     accelerator names are the catalog's lower-kebab labels upper-cased.
//     Every region describes the same types (the catalog's, which lists
//     the types of us-east-1, us-east-2 and us-west-2), so no type exists
//     only in the live answer; the realistic world varies offerings and
//     prices, not the type list.
//   - Offerings by zone and Spot prices are the worlds' models above, not
//     EC2's data; no zone lacks on-demand while offering Spot, or the
//     reverse. The realistic world's Spot price moves on fixed hourly steps
//     (EC2's change irregularly) and its history starts when the simulator
//     was created.
//   - DescribeSpotPriceHistory reports product Linux/UNIX only (for either
//     Linux/UNIX or Linux/UNIX (Amazon VPC) asked), never Windows or SUSE;
//     without StartTime it returns the whole history since the simulator
//     started (EC2 goes back 90 days), newest first.
//   - GetProducts serves only AmazonEC2 Compute Instance products of the
//     simulator's own region (the Price List API serves every region from
//     us-east-1 and ap-south-1 endpoints): per type the Linux shared-tenancy
//     used-capacity product a node pays, plus look-alikes (an unused
//     capacity reservation at the same price, dedicated tenancy at +10%,
//     Windows at +0.046 per vCPU-hour) that a client must filter away;
//     fewer attributes than AWS lists; one fixed publication date; other
//     service codes fail with NotFoundException; GetAttributeValues and
//     DescribeServices are not served.
//   - Instances launch from EBS only, with one private IPv4 address, no
//     public IP, no network-interface objects; the hypervisor is reported as
//     xen (as EC2 does for Nitro too). Instance tags include the
//     aws:ec2:fleet-id and aws:ec2launchtemplate:* tags EC2 adds.
//   - Tags are returned sorted by key; EC2 promises no order.
//   - DescribeInstances pages count instances, not reservations.
//   - Subnet addresses are handed out in order and reused once released;
//     SetAvailableIPs only changes the reported free count.
package ec2sim
